// MeshComm: one rank's communicators for a DeviceMesh — the world group plus one sub-group per
// mesh dimension — and tensor-level collectives over mesh dimensions, flat or hierarchical.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/comm/backend.hpp"
#include "tessera/comm/hierarchical.hpp"
#include "tessera/core/mesh.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::comm {

/// How a MeshComm reduces over several mesh dimensions (hierarchical.hpp).
struct MeshCommOptions {
  /// Flat, Hierarchical (every reduction that spans the node dimension) or Auto
  /// (choose_all_reduce_algorithm per reduction, by size and topology).
  AllReduceAlgorithm all_reduce = AllReduceAlgorithm::Auto;
  /// The mesh dimension whose ranks are on different hosts (its other coordinates are the ranks
  /// of one node), e.g. "dp" for dp=2,sp=4 on two hosts of four GPUs. Empty: the dimension named
  /// "node" if the mesh has one, else none (every reduction is flat).
  std::string node_dim;
  /// Auto's size limit for Hierarchical (kHierarchicalMaxBytes, from the simulator).
  std::size_t hierarchical_max_bytes = kHierarchicalMaxBytes;
};

/// Collective at construction: every rank of `world` builds its MeshComm in the same order.
/// The mesh's ranks are ranks of `world`; world.size() must equal mesh.size(). It splits one
/// sub-group per non-empty set of mesh dimensions (3 for a 2-d mesh), so a reduction over
/// several dimensions is one collective — or, when it spans the node dimension and the options
/// say so, the three of hierarchical_all_reduce (intra-node group, node-dimension group).
/// Throws InvalidArgument, before any communication, when options.node_dim names no mesh
/// dimension or options.all_reduce is Hierarchical and the mesh has no node dimension.
class MeshComm {
 public:
  MeshComm(core::DeviceMesh mesh, Backend& world, MeshCommOptions options = {});
  MeshComm(const MeshComm&) = delete;
  MeshComm& operator=(const MeshComm&) = delete;

  const core::DeviceMesh& mesh() const noexcept { return mesh_; }
  Backend& world() noexcept { return world_; }
  int rank() const noexcept { return world_.rank(); }
  /// This rank's coordinates on the mesh.
  const std::vector<int>& coords() const noexcept { return coords_; }
  /// This rank's sub-group along mesh dimension `dim` (its group rank is its coordinate).
  Backend& dim(int dim);
  /// This rank's sub-group over a set of mesh dimensions (ranks ordered row-major over them).
  Backend& group(const std::vector<int>& mesh_dims);

  const MeshCommOptions& options() const noexcept { return options_; }
  /// The node dimension (options.node_dim resolved), or -1 when the mesh has none.
  int node_dim() const noexcept { return node_dim_; }
  /// How all_reduce runs `t` over `mesh_dims`: Hierarchical only when the reduction spans the
  /// node dimension and one more dimension of size > 1, and the options (Auto: by size, process
  /// layout and memory space) choose it; Flat otherwise. Never Auto.
  AllReduceAlgorithm all_reduce_algorithm(const core::Tensor& t, const std::vector<int>& mesh_dims) const;

  /// In place: reduces a contiguous tensor over the listed mesh dimensions. Flat: one collective
  /// on their group (the local backend sums in group-rank order, so deterministic). Hierarchical:
  /// hierarchical_all_reduce (its rounding and workspace are documented there). Blocks until done.
  void all_reduce(core::Tensor& t, const std::vector<int>& mesh_dims, ReduceOp op = ReduceOp::Sum);
  /// The same, returning the pending Work (null when there is nothing to reduce). Hierarchical
  /// waits for its first two phases inside this call and returns the last one's Work.
  WorkPtr all_reduce_async(core::Tensor& t, const std::vector<int>& mesh_dims, ReduceOp op = ReduceOp::Sum);

 private:
  int mask_of(const std::vector<int>& mesh_dims) const;

  core::DeviceMesh mesh_;
  Backend& world_;
  MeshCommOptions options_;
  int node_dim_ = -1;
  std::vector<int> coords_;
  std::vector<std::unique_ptr<Backend>> groups_;  // indexed by the bit mask of mesh dims
};

/// A BufferView over a contiguous tensor (throws InvalidArgument when it is not contiguous).
BufferView buffer_of(const core::Tensor& t);

}  // namespace tessera::comm
