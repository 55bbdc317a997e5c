// Compile check of the kernel headers under nvcc: includes every header of kernels/, instantiates
// the grid-stride launcher of pass.hpp over each body for float and double, and the dispatch over
// a launcher made of those kernels. Built by hand (see kernels/README.md) or by the cuda target.
#include <cstdint>

#include "dispatch.hpp"
#include "pass.hpp"

namespace tessera::compute::cuda::kernels::nvcc_check {

template <class Body, class P>
__global__ void run_pass(P p, std::int64_t items) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < items;
       i += std::int64_t(gridDim.x) * blockDim.x)
    Body::run(p, i);
}

/// A launcher over run_pass (no stream, no workspace pool: a compile check only).
struct CheckLauncher {
  template <class Body, class P>
  void pass(const P& p, std::int64_t items) {
    if (items > 0) run_pass<Body, P><<<1, 256>>>(p, items);
  }
  void* workspace(std::size_t) { return nullptr; }
  void read_back(void*, const void*, std::size_t) {}
};

/// Instantiates the whole routing (every op's passes, both dtypes) over CheckLauncher.
void run_on_check_launcher(const OpCall& call) {
  CheckLauncher l;
  run_kernel_op(l, call);
}

/// And the tensor helpers (every word size of the raw copy and fill).
void tensors_on_check_launcher(const core::Tensor& src, core::Tensor& dst) {
  CheckLauncher l;
  run_tensor_copy(l, src, dst);
  run_tensor_add(l, src, dst);
  run_tensor_fill(l, dst, 0.0);
}

}  // namespace tessera::compute::cuda::kernels::nvcc_check
