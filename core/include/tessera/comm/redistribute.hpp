// redistribute: the one conversion between any two layouts of a tensor on a mesh.
#pragma once

#include "tessera/comm/mesh_comm.hpp"
#include "tessera/core/layout.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::comm {

/// Converts this rank's local piece of a tensor from layout `from` to layout `to` (same mesh and
/// global shape). Collective over the mesh: every rank calls it with the same layouts.
/// Per mesh dimension it uses the matching collective — Shard→Replicate all-gather,
/// Partial→Replicate all-reduce, Partial→Shard reduce-scatter, Shard(i)→Shard(j) all-to-all,
/// Replicate→Shard a local slice, Replicate→Partial keeps the value on coordinate 0 — with
/// uneven (balanced) shards padded to the largest piece on the wire. Layouts in which a tensor
/// dimension is sharded by several mesh dimensions go through Replicate (gather, then slice).
/// The result is a new contiguous tensor booked like `local` (same category and allocator).
core::Tensor redistribute(MeshComm& comm, const core::Tensor& local, const core::Layout& from,
                          const core::Layout& to);

}  // namespace tessera::comm
