// MeshComm: per-dimension sub-groups split from the world communicator; flat or hierarchical
// all-reduce over them.
#include "tessera/comm/mesh_comm.hpp"

#include "tessera/core/error.hpp"

namespace tessera::comm {

BufferView buffer_of(const core::Tensor& t) {
  TESSERA_CHECK(t.is_contiguous(), "communication needs a contiguous tensor, got a strided view ",
                t.describe(), "; call contiguous() first");
  return BufferView{t.raw_data(), static_cast<std::size_t>(t.numel()), t.dtype(), t.space(), t.device()};
}

namespace {

std::string dim_names(const core::DeviceMesh& m) {
  std::string s;
  for (int d = 0; d < m.ndim(); ++d) s += (d ? ", " : "") + m.dim_name(d);
  return s;
}

}  // namespace

MeshComm::MeshComm(core::DeviceMesh mesh, Backend& world, MeshCommOptions options)
    : mesh_(std::move(mesh)), world_(world), options_(std::move(options)) {
  TESSERA_CHECK(world_.size() == mesh_.size(), "mesh ", mesh_.to_string(), " has ", mesh_.size(),
                " ranks but the '", world_.name(), "' world has ", world_.size(),
                "; launch as many ranks as the mesh holds");
  TESSERA_CHECK(mesh_.ndim() <= 6, "mesh ", mesh_.to_string(), " has more than 6 dimensions");
  // Checked before the splits (collective), so every rank refuses the same options and none waits.
  if (!options_.node_dim.empty()) {
    node_dim_ = mesh_.find_dim(options_.node_dim);
    TESSERA_CHECK(node_dim_ >= 0, "MeshComm on rank ", world_.rank(), ": node_dim '", options_.node_dim,
                  "' is not a dimension of mesh ", mesh_.to_string(), " (dimensions: ", dim_names(mesh_),
                  "); set node_dim to the mesh dimension whose ranks are on different hosts");
  } else {
    node_dim_ = mesh_.find_dim("node");
  }
  TESSERA_CHECK(options_.all_reduce != AllReduceAlgorithm::Hierarchical || node_dim_ >= 0,
                "MeshComm on rank ", world_.rank(), ": the hierarchical all-reduce needs a node dimension "
                "but mesh ", mesh_.to_string(), " has none named 'node' (dimensions: ", dim_names(mesh_),
                "); set MeshCommOptions::node_dim to the dimension whose ranks are on different hosts, "
                "or use AllReduceAlgorithm::Flat or Auto");
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

int MeshComm::mask_of(const std::vector<int>& mesh_dims) const {
  int mask = 0;
  for (int d : mesh_dims) {
    TESSERA_CHECK(d >= 0 && d < mesh_.ndim(), "mesh ", mesh_.to_string(), " has no dimension ", d);
    mask |= 1 << d;
  }
  TESSERA_CHECK(mask != 0, "mesh ", mesh_.to_string(), ": a group needs at least one dimension");
  return mask;
}

Backend& MeshComm::group(const std::vector<int>& mesh_dims) { return *groups_[mask_of(mesh_dims)]; }

AllReduceAlgorithm MeshComm::all_reduce_algorithm(const core::Tensor& t,
                                                  const std::vector<int>& mesh_dims) const {
  const int mask = mask_of(mesh_dims);
  if (node_dim_ < 0 || !(mask & (1 << node_dim_))) return AllReduceAlgorithm::Flat;
  const int node_mask = 1 << node_dim_;
  AllReduceShape s;
  s.nodes = mesh_.dim_size(node_dim_);
  s.ranks_per_node = mask == node_mask ? 1 : groups_[mask & ~node_mask]->size();
  s.bytes = t.nbytes();
  s.multi_process = world_.capabilities().multi_process;
  s.host_buffer = t.is_host();
  return choose_all_reduce_algorithm(options_.all_reduce, s, options_.hierarchical_max_bytes);
}

WorkPtr MeshComm::all_reduce_async(core::Tensor& t, const std::vector<int>& mesh_dims, ReduceOp op) {
  if (mesh_dims.empty()) return nullptr;
  const int mask = mask_of(mesh_dims);
  Backend& g = *groups_[mask];
  if (g.size() == 1) return nullptr;
  // Over the node dimension alone (one rank per node) the hierarchy is the flat collective.
  if (all_reduce_algorithm(t, mesh_dims) == AllReduceAlgorithm::Hierarchical && mask != 1 << node_dim_)
    return hierarchical_all_reduce(t, *groups_[mask & ~(1 << node_dim_)], *groups_[1 << node_dim_], op);
  return g.all_reduce(buffer_of(t), op);
}

void MeshComm::all_reduce(core::Tensor& t, const std::vector<int>& mesh_dims, ReduceOp op) {
  if (WorkPtr w = all_reduce_async(t, mesh_dims, op)) w->wait();
}

}  // namespace tessera::comm
