// What the cuda backend's tests share: the backend from the registry (or the skip line saying why
// there is none), an allocator over its device memory, and host<->device helpers.
#pragma once

#include <memory>
#include <string>

#include "support/catch.hpp"
#include "support/test_utils.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/core/allocator.hpp"
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
                                 << "; run tests/gpu/run_gpu_checks.sh on a machine with a GPU"); \
  const ::tessera::test::cuda::Gpu g = ::tessera::test::cuda::make_gpu()
