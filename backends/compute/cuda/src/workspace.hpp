// Scratch device memory for one library call (cuDNN/cuBLAS workspaces, staging, zero-padded
// frames): from the backend's pool, booked as MemCategory::Workspace while it lives.
#pragma once

#include <cstddef>

#include "cuda_memory.hpp"
#include "tessera/core/allocator.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::compute::cuda {

class Workspace {
 public:
  /// `booking`: the allocator (over `mem`) that books the blocks; null books nothing.
  Workspace(CudaMemory& mem, core::AllocatorPtr booking) : mem_(mem), booking_(std::move(booking)) {}

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
