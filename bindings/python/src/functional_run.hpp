// The runner behind tessera.functional's layer ops (functional_modules.cpp): one core layer built
// on every in-process rank, fed its piece of the input, run forward and backward, its parameter
// gradients all-reduced as the trainer does, the results gathered into global NumPy arrays.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common.hpp"
#include "tessera/nn/module.hpp"

namespace tessera::python {

/// One parameter of the layer: `name` relative to the layer ("weight", "fc1.bias"), `key` the
/// result's suffix (grad_<key>), `value` an array to copy in, or None to keep the layer's own
/// initial value.
struct ParamIn {
  std::string name;
  std::string key;
  py::object value;
};

/// Context values the layer sees (DropPath's keep decision hashes seed and step).
struct RunOptions {
  std::uint64_t seed = 0;
  std::int64_t step = 0;
};

/// Runs the layer `make` builds (the same on every rank) over the mesh `mesh_o` (None: one rank)
/// with `x_in` laid out by `placement_o` (a Placement or one per mesh dimension; None: replicated
/// on a one-rank mesh). Returns {"output", "grad_input", "grad_<key>" per parameter} as global
/// float32 arrays; the gradients are None without `dy_in` (and grad_<key> is None when the layer
/// has no parameter of that name). Releases the GIL while the ranks run. `op` names the call in
/// errors ("tessera.functional.<op>: ...").
py::dict run_op(const std::string& op, const std::function<nn::ModulePtr()>& make, const py::object& x_in,
                const std::vector<ParamIn>& params, const py::object& mesh_o, const py::object& placement_o,
                const py::object& dy_in, const RunOptions& opt);

}  // namespace tessera::python
