// MeshComm: one rank's communicators for a DeviceMesh — the world group plus one sub-group per
// mesh dimension — and tensor-level collectives over mesh dimensions.
#pragma once

#include <memory>
#include <vector>

#include "tessera/comm/backend.hpp"
#include "tessera/core/mesh.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::comm {

/// Collective at construction: every rank of `world` builds its MeshComm in the same order.
/// The mesh's ranks are ranks of `world`; world.size() must equal mesh.size(). It splits one
/// sub-group per non-empty set of mesh dimensions (3 for a 2-d mesh), so a reduction over
/// several dimensions is one collective.
class MeshComm {
 public:
  MeshComm(core::DeviceMesh mesh, Backend& world);
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

  /// In place: reduces a contiguous tensor over the listed mesh dimensions (one collective on
  /// their group; summed in group-rank order, so deterministic). Blocks until done.
  void all_reduce(core::Tensor& t, const std::vector<int>& mesh_dims, ReduceOp op = ReduceOp::Sum);
  /// The same, returning the pending Work (null when there is nothing to reduce).
  WorkPtr all_reduce_async(core::Tensor& t, const std::vector<int>& mesh_dims, ReduceOp op = ReduceOp::Sum);

 private:
  core::DeviceMesh mesh_;
  Backend& world_;
  std::vector<int> coords_;
  std::vector<std::unique_ptr<Backend>> groups_;  // indexed by the bit mask of mesh dims
};

/// A BufferView over a contiguous tensor (throws InvalidArgument when it is not contiguous).
BufferView buffer_of(const core::Tensor& t);

}  // namespace tessera::comm
