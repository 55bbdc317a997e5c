// The extension module tessera._tessera: each file binds one part (errors, tensors, layouts, the
// functional ops, models and training, the simulator). The Python package `tessera` re-exports it.
#include "common.hpp"

PYBIND11_MODULE(_tessera, m) {
  m.doc() = "tessera: spatial tensor parallelism for high-resolution CNNs (C++ core, pybind11)";
  using namespace tessera::python;
  bind_errors(m);
  bind_tensor(m);
  bind_layout(m);
  bind_functional(m);
  bind_functional_modules(m);
  bind_functional_blocks(m);
  bind_models(m);
  bind_sim(m);
}
