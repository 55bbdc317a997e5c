// Internal to the planner: what a candidate's folded replay tells without the event engine — its
// memory against the limit, and a lower bound on the engine's iteration time (plan_bounds.cpp has
// the argument) — and the cache of collective lower bounds the candidates share.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/sim/engine.hpp"
#include "tessera/sim/fold.hpp"
#include "tessera/sim/planner.hpp"

namespace tessera::sim::detail_plan {

/// Lower bounds on simulate_collective's time, by (op name, group nodes, bytes). Thread-safe.
class CollectiveBounds {
 public:
  CollectiveBounds(const Topology& topology, Algorithm algorithm)
      : topo_(topology), algo_(algorithm) {}
  /// 0 where the engine takes 0 (one rank, no bytes, a barrier) or no plan can be made.
  Picos get(const std::string& name, const std::vector<int>& nodes, std::int64_t bytes);

 private:
  const Topology& topo_;
  Algorithm algo_;
  std::mutex mutex_;
  std::map<std::tuple<std::string, std::vector<int>, std::int64_t>, Picos> cache_;
};

/// A lower bound on simulate_iteration(folded, ...).iteration_ps from the relaxed schedule of rank
/// `replay` alone, valid for a rank the folded engine simulates (rank 0 always is).
Picos rank_lower_bound(const RankReplay& replay, const Topology& topology,
                       const DeviceCatalog& catalog, const EngineOptions& options,
                       CollectiveBounds& collectives);

/// A lower bound on simulate_iteration(folded, topology, catalog, options).iteration_ps: the
/// largest rank_lower_bound over one simulated rank per (class, device).
Picos iteration_lower_bound(const FoldedReplay& folded, const Topology& topology,
                            const DeviceCatalog& catalog, const EngineOptions& options,
                            CollectiveBounds& collectives);

/// Memory in `e` from the replays `classes` of a mesh of `ranks` ranks: the largest peaks (what
/// the engine reports per device), the limit (the cap, or the smallest capacity of the devices
/// used) and whether it fits.
void set_memory(const std::vector<const RankReplay*>& classes, int ranks, const Topology& topology,
                const DeviceCatalog& catalog, const PlanOptions& options, PlanEntry& e);

}  // namespace tessera::sim::detail_plan
