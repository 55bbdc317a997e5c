// What the cuda backend's tests share: the backend from the registry (or the skip line saying why
// there is none), an allocator over its device memory, host<->device helpers, and the 16-bit
// tensors of the bf16/f16 tests (rounded and widened by core/half.hpp).
#pragma once

#include <memory>
#include <string>

#include "support/catch.hpp"
#include "support/test_utils.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/core/allocator.hpp"
#include "tessera/core/half.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::test::cuda {

struct Gpu {
  std::unique_ptr<compute::Backend> backend;
  core::AllocatorPtr alloc;  ///< over backend->device_memory()

  /// A device copy of a host tensor.
  core::Tensor put(const core::Tensor& host,
                   core::MemCategory c = core::MemCategory::Activation) const {
    return host.to(alloc, c);
  }
};

/// A host tensor of dtype dt (BF16/F16) holding the f32 host tensor t's values rounded.
inline core::Tensor half_of(const core::Tensor& t, core::DType dt) {
  const core::Tensor c = t.to_host().contiguous();
  core::Tensor h = core::Tensor::empty(c.shape(), dt, core::MemCategory::Workspace);
  for (std::int64_t i = 0; i < c.numel(); ++i)
    static_cast<std::uint16_t*>(h.raw_data())[i] = core::float_to_half(c.data<float>()[i], dt);
  return h;
}
/// The f32 host tensor of a 16-bit tensor's values (exact; host or device).
inline core::Tensor widened(const core::Tensor& t) {
  const core::Tensor c = t.to_host().contiguous();
  core::Tensor f = core::Tensor::empty(c.shape(), core::DType::F32, core::MemCategory::Workspace);
  for (std::int64_t i = 0; i < c.numel(); ++i)
    f.data<float>()[i] =
        core::half_to_float(static_cast<std::uint16_t*>(c.raw_data())[i], t.dtype());
  return f;
}

inline Gpu make_gpu(const compute::BackendOptions& o = {}) {
  compute::Registry r;
  register_builtin_backends(r);
  Gpu g;
  g.backend = r.create("cuda", o);
  g.alloc = std::make_shared<core::Allocator>("cuda test", g.backend->device_memory());
  return g;
}

}  // namespace tessera::test::cuda

/// Declares `g` (a Gpu), or ends the test as skipped with the reason no GPU can run it here.
#define TESSERA_CUDA_REQUIRE_GPU(g)                                                               \
  const std::string tessera_cuda_why_ = ::tessera::compute_backend_unusable("cuda");              \
  if (!tessera_cuda_why_.empty())                                                                 \
    TESSERA_SKIP("no GPU: cuda " << tessera_cuda_why_                                             \
                                 << "; run the GPU check bundle on a machine with a GPU (tests/gpu/README.md)"); \
  const ::tessera::test::cuda::Gpu g = ::tessera::test::cuda::make_gpu()
