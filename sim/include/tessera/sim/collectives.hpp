// Collective algorithms as sequences of transfer steps over a group of devices, their closed-form
// costs, the NCCL-like choice by size, and simulation of one collective alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/sim/network.hpp"

namespace tessera::sim {

enum class CollectiveOp { AllReduce, AllGather, ReduceScatter, Broadcast, AllToAll };
/// How a collective moves data. Which op supports which (Auto tries each and keeps the fastest):
/// - Ring: all_reduce (reduce-scatter + all-gather, 2(p−1) steps of n/p), all_gather and
///   reduce_scatter (p−1 steps of n/p), broadcast (pipelined chain from rank 0). When the group
///   spans several hosts with the same number of ranks each, L = ranks per host rings run at once,
///   each carrying 1/L of the data, snaking through the hosts so that every host-to-host hop joins
///   ranks of the same local index (same rail, like NCCL's channels).
/// - Tree: all_reduce as NCCL's pipelined double binary tree (two trees, half the data each,
///   reduce up then broadcast down in c chunks); broadcast down one binary tree.
/// - Hierarchical: all_reduce as intra-host reduce-scatter, inter-host all-reduce of each rank's
///   1/L shard over its rail, intra-host all-gather (the group must span hosts evenly).
/// - Pairwise: all_to_all in p−1 steps, rank r sending n/p to rank r+s in step s.
/// - Direct: for a direct-link mesh (AMD Infinity Fabric: a link per GPU pair), offered when the
///   ranks on each host, at least 3, are pairwise joined by one-hop routes. reduce_scatter,
///   all_gather and all_to_all in one step, every rank sending n/p to each of the p−1 others at
///   once (every link busy, where a ring uses one per rank); all_reduce as that reduce-scatter
///   then that all-gather (RCCL's direct "two-shot" all-reduce). Across hosts (the same count on
///   each, ≥ 3), all_reduce only: direct reduce-scatter within each host, ring all-reduce of each
///   rank's 1/L shard over its rail, direct all-gather within each host (Hierarchical with direct
///   phases).
enum class Algorithm { Auto, Ring, Tree, Hierarchical, Pairwise, Direct };
std::string collective_op_name(CollectiveOp op);
std::string algorithm_name(Algorithm a);
CollectiveOp parse_collective_op(const std::string& s);  ///< "all_reduce", ... (InvalidArgument)
/// "auto", "ring", "tree", "hier" (or "hierarchical"), "pairwise", "direct" (InvalidArgument
/// otherwise).
Algorithm parse_algorithm(const std::string& s);

/// One transfer between two members of the group (indices into the group).
struct Transfer {
  int from = 0, to = 0;
  std::int64_t bytes = 0;
};

/// A collective as steps; a step starts when the previous one has completed everywhere.
/// `repeat` lets identical steps (a ring's 2(p−1) steps, a pipeline's steady state) be simulated
/// once and the time multiplied: exact when the network carries nothing else, which is how
/// simulate_collective runs it (an event engine overlapping other traffic must expand them).
struct CollectiveStep {
  std::vector<Transfer> transfers;
  int repeat = 1;
};
struct CollectivePlan {
  CollectiveOp op = CollectiveOp::AllReduce;
  Algorithm algorithm = Algorithm::Ring;
  std::int64_t bytes = 0;  ///< the buffer size per rank (nccl-tests convention)
  std::vector<CollectiveStep> steps;
};

/// `group` lists topology node ids in rank order (distinct compute nodes). `bytes` is the per-rank
/// buffer (all_gather: the gathered output; reduce_scatter: the input; all_to_all: the whole send
/// buffer). Chunks that do not divide evenly are rounded up (never faster). Throws InvalidArgument
/// for a bad group or size, Unsupported for an algorithm the op lacks (Hierarchical: a group that
/// does not span hosts evenly). Auto is resolved by simulate_collective, not here.
CollectivePlan plan_collective(const Topology& t, CollectiveOp op, Algorithm algo,
                               const std::vector<int>& group, std::int64_t bytes);

/// The algorithms `op` supports on this group, in the order Auto tries them.
std::vector<Algorithm> candidate_algorithms(const Topology& t, CollectiveOp op,
                                            const std::vector<int>& group);

/// Result of simulating one collective on an otherwise idle network.
struct CollectiveResult {
  Algorithm algorithm = Algorithm::Ring;
  Picos time_ps = 0;
  double algbw_GBps = 0;  ///< bytes / time, GB = 1e9 bytes
  double busbw_GBps =
      0;  ///< nccl-tests: algbw · 2(p−1)/p (all_reduce), · (p−1)/p (gather/scatter/all-to-all)
  std::vector<double> edge_bytes;  ///< per directed edge
};

/// Simulates the plan through a FlowNetwork (contention included). Auto picks the algorithm
/// with the smallest simulated time, like NCCL's tuner picks by size (ties: the earlier of
/// candidate_algorithms). One rank, or an empty group of transfers, takes 0 ps and reports 0 GB/s.
CollectiveResult simulate_collective(const Topology& t, CollectiveOp op, Algorithm algo,
                                     const std::vector<int>& group, std::int64_t bytes);
/// Simulates a plan on an otherwise idle network: each step's transfers start together, the step
/// ends when the last completes, and its time counts `repeat` times.
CollectiveResult simulate_plan(const Topology& t, const CollectivePlan& plan,
                               const std::vector<int>& group);

/// A lower bound on simulate_plan's time, without simulating: per step the larger of the slowest
/// transfer alone (route latency + bytes / route bandwidth) and the busiest edge (the smallest
/// route latency among its transfers + the bytes they carry / its bandwidth), times the repeat
/// count, less a margin for the simulation's rounding. Auto skips an algorithm whose bound
/// exceeds the best time simulated so far (the choice is unchanged, its cost falls: a tree
/// all-reduce over a thousand ranks is tens of thousands of flows).
Picos plan_lower_bound(const Topology& t, const CollectivePlan& plan,
                       const std::vector<int>& group);

/// The nccl-tests bus-bandwidth factor of an op for p ranks.
double busbw_factor(CollectiveOp op, int p);

}  // namespace tessera::sim
