// MeshComm: per-dimension sub-groups split from the world communicator.
#include "tessera/comm/mesh_comm.hpp"

#include "tessera/core/error.hpp"

namespace tessera::comm {

BufferView buffer_of(const core::Tensor& t) {
  TESSERA_CHECK(t.is_contiguous(), "communication needs a contiguous tensor, got a strided view ",
                t.describe(), "; call contiguous() first");
  return BufferView{t.raw_data(), static_cast<std::size_t>(t.numel()), t.dtype(), t.space(), t.device()};
}

MeshComm::MeshComm(core::DeviceMesh mesh, Backend& world) : mesh_(std::move(mesh)), world_(world) {
  TESSERA_CHECK(world_.size() == mesh_.size(), "mesh ", mesh_.to_string(), " has ", mesh_.size(),
                " ranks but the '", world_.name(), "' world has ", world_.size(),
                "; launch as many ranks as the mesh holds");
  TESSERA_CHECK(mesh_.ndim() <= 6, "mesh ", mesh_.to_string(), " has more than 6 dimensions");
  coords_ = mesh_.coords_of(world_.rank());
  const int n = 1 << mesh_.ndim();
  groups_.resize(n);
  for (int mask = 1; mask < n; ++mask) {
    std::vector<int> dims;
    for (int d = 0; d < mesh_.ndim(); ++d)
      if (mask & (1 << d)) dims.push_back(d);
    groups_[mask] = world_.split(mesh_.group_ranks(dims, world_.rank()));
    TESSERA_ASSERT(groups_[mask] != nullptr, "split gave no sub-group for mesh dimension set ", mask);
  }
}

Backend& MeshComm::dim(int d) {
  TESSERA_CHECK(d >= 0 && d < mesh_.ndim(), "mesh ", mesh_.to_string(), " has no dimension ", d);
  return *groups_[1 << d];
}

Backend& MeshComm::group(const std::vector<int>& mesh_dims) {
  int mask = 0;
  for (int d : mesh_dims) {
    TESSERA_CHECK(d >= 0 && d < mesh_.ndim(), "mesh ", mesh_.to_string(), " has no dimension ", d);
    mask |= 1 << d;
  }
  TESSERA_CHECK(mask != 0, "mesh ", mesh_.to_string(), ": a group needs at least one dimension");
  return *groups_[mask];
}

WorkPtr MeshComm::all_reduce_async(core::Tensor& t, const std::vector<int>& mesh_dims, ReduceOp op) {
  if (mesh_dims.empty()) return nullptr;
  Backend& g = group(mesh_dims);
  if (g.size() == 1) return nullptr;
  return g.all_reduce(buffer_of(t), op);
}

void MeshComm::all_reduce(core::Tensor& t, const std::vector<int>& mesh_dims, ReduceOp op) {
  if (WorkPtr w = all_reduce_async(t, mesh_dims, op)) w->wait();
}

}  // namespace tessera::comm
