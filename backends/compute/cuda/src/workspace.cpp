// Workspace: scratch device tensors for one call, booked as Workspace (see workspace.hpp).
#include "workspace.hpp"

namespace tessera::compute::cuda {

core::Tensor Workspace::tensor(core::Shape shape, core::DType dtype) const {
  return device_scratch(mem_, std::move(shape), dtype);
}

core::Tensor Workspace::bytes(std::size_t bytes) const {
  if (bytes == 0) return {};
  return tensor({static_cast<std::int64_t>((bytes + 7) / 8)}, core::DType::F64);
}

}  // namespace tessera::compute::cuda
