// Scratch device memory for one call (cuDNN/cuBLAS workspaces, zero-padded frames, staging, the
// kernels' partial sums): device tensors from an allocator over the backend's pool, booked as
// MemCategory::Workspace while they live.
#pragma once

#include <cstddef>

#include "cuda_memory.hpp"
#include "tessera/core/allocator.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::compute::cuda {

class Workspace {
 public:
  /// `booking`: an allocator over `mem` (core::Allocator(name, mem)).
  Workspace(CudaMemory& mem, core::AllocatorPtr booking);

  /// A contiguous device tensor of `shape` (uninitialised), freed stream-ordered when its last
  /// copy goes (so it may be dropped as soon as the work using it is enqueued).
  core::Tensor tensor(core::Shape shape, core::DType dtype) const;
  /// `bytes` of device memory as a tensor (f64 elements, rounded up); undefined for 0 bytes.
  core::Tensor bytes(std::size_t bytes) const;
  CudaMemory& memory() const noexcept { return mem_; }

 private:
  CudaMemory& mem_;
  core::AllocatorPtr booking_;
};

}  // namespace tessera::compute::cuda
