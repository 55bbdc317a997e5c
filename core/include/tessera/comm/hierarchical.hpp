// Hierarchical all-reduce (Horovod's and NCCL's two-level scheme): reduce-scatter inside each
// node, all-reduce of every rank's shard across nodes among the ranks of the same local index,
// all-gather inside the node; and the rule by which MeshComm chooses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tessera/comm/backend.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::comm {

/// How MeshComm runs an all-reduce over several mesh dimensions.
/// - Flat: one collective on the group of all the dimensions (the backend's own algorithm).
/// - Hierarchical: when the reduction spans the node dimension (MeshCommOptions::node_dim),
///   three collectives: reduce_scatter over the other reduced dimensions (inside a node), the
///   all_reduce of this rank's shard over the node dimension (ranks of the same local index, one
///   rail each), all_gather inside the node. A reduction that does not span the node dimension
///   stays flat: nothing of it crosses nodes.
/// - Auto: Hierarchical where choose_all_reduce_algorithm says so, else Flat.
enum class AllReduceAlgorithm : std::uint8_t { Auto, Flat, Hierarchical };
/// "auto", "flat", "hier".
std::string_view all_reduce_algorithm_name(AllReduceAlgorithm a) noexcept;
/// "auto", "flat", "hier" or "hierarchical"; InvalidArgument naming the choices otherwise.
AllReduceAlgorithm parse_all_reduce_algorithm(std::string_view s);

/// The largest buffer for which Auto picks Hierarchical. The simulator's auto (the fastest of
/// ring, tree and hier, sim::simulate_collective) prefers hier up to 32 MiB and the rail-aligned
/// ring from 64 MiB on dgx-a100:2, dgx-h100:2 and dgx-a100:4 (crossover 32–48 MiB; dgx-h100:8
/// ~96 MiB): fewer latency-bound steps (2(L−1) + 2(H−1) against 2(LH−1)) win until the intra-node
/// phases' extra bytes cost more. tests/sim/hierarchical_test.cpp holds this constant to the model.
inline constexpr std::size_t kHierarchicalMaxBytes = std::size_t{32} << 20;

/// What Auto looks at for one reduction.
struct AllReduceShape {
  int nodes = 1;           ///< ranks along the node dimension in the reduction (1: not spanned)
  int ranks_per_node = 1;  ///< ranks of the reduction inside one node (the other reduced dims)
  std::size_t bytes = 0;   ///< the buffer
  bool multi_process = false;  ///< the world's ranks may be in different processes or hosts
  bool host_buffer = true;     ///< the buffer is in host memory (MemorySpace::Host)
};

/// Resolves `requested` for one reduction; never returns Auto. Auto is Hierarchical when the
/// reduction spans ≥ 2 nodes with ≥ 2 ranks each (the simulator's condition for hier: several
/// hosts, the same count on each, which a mesh always has), the ranks may be on different hosts
/// (Capabilities::multi_process: in-process threads share one memory, so splitting buys nothing),
/// the buffer is on the host (device buffers go to a backend such as NCCL that picks its own
/// topology-aware algorithm) and is at most `max_bytes`. Flat and Hierarchical are returned as
/// given (a forced Hierarchical with 1 node or 1 rank per node runs the phases whose group has
/// more than one rank, which is the flat collective or an equivalent pair).
AllReduceAlgorithm choose_all_reduce_algorithm(AllReduceAlgorithm requested, const AllReduceShape& s,
                                               std::size_t max_bytes = kHierarchicalMaxBytes);

/// In place: reduces the contiguous host tensor `t` over `intra` × `inter` in three phases,
///   reduce_scatter(intra) → all_reduce(inter) of the shard → all_gather(intra),
/// where every rank of `inter` has the same local index in its `intra` group (MeshComm's node
/// dimension group). A phase whose group has one rank is skipped.
///
/// Counts: the buffer is cut into intra.size() shards of ⌈count/L⌉ elements; a count not
/// divisible by L is padded with zeros in a workspace copy (the padding is reduced and dropped).
/// Avg: the phases sum and the shard is divided by the whole group's size once (integers:
/// truncated toward zero), as a flat Avg does. bf16/f16: the buffer is widened to f32, the phases
/// run in f32 and the result is rounded to 16 bits once (twice the 16-bit bytes on the wire);
/// every backend's one-rounding bound therefore holds for the two-level order too. f32/f64 sums
/// add each input through (L−1) + (H−1) additions, so the error is at most γ_{L+H−2}·Σ|x_i|
/// (γ_k = k·u/(1−k·u)); with the local backend's rank-order sums, integer-valued inputs whose
/// partial sums are exact give the flat result bit for bit.
///
/// Blocking: the first phases are waited for inside this call; the returned Work is the last
/// phase's (its completion copies the result back, unpads and rounds). With local and ucx every
/// phase completes in the call, so the Work is already complete. Workspace (shard, padded or f32
/// copies) is booked under MemCategory::Workspace with `t`'s allocator and held by the Work.
/// A meta tensor (the simulator's replay) issues the same collectives and touches no data.
/// Throws InvalidArgument for a strided tensor, Unsupported for one in device memory, and what
/// the backends throw (a phase's failure surfaces from this call or from the Work's wait()).
/// The groups are the caller's to choose (MeshComm: the node group and the node-dimension group).
WorkPtr hierarchical_all_reduce(core::Tensor& t, Backend& intra, Backend& inter, ReduceOp op);

}  // namespace tessera::comm
