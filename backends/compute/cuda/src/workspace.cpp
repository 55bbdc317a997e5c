// Workspace: scratch device tensors for one call, booked as Workspace (see workspace.hpp).
#include "workspace.hpp"

namespace tessera::compute::cuda {

Workspace::Workspace(CudaMemory& mem, core::AllocatorPtr booking)
    : mem_(mem), booking_(std::move(booking)) {
  TESSERA_ASSERT(booking_ && booking_->device() == &mem_,
                 "cuda workspace: the booking allocator must be over ", mem_.describe());
}

core::Tensor Workspace::tensor(core::Shape shape, core::DType dtype) const {
  return core::Tensor::empty(std::move(shape), dtype, core::MemCategory::Workspace, booking_);
}

core::Tensor Workspace::bytes(std::size_t bytes) const {
  if (bytes == 0) return {};
  return tensor({static_cast<std::int64_t>((bytes + 7) / 8)}, core::DType::F64);
}

}  // namespace tessera::compute::cuda
