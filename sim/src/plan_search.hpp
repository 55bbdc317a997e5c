// Internal to the planner: the search over the candidates planner.cpp enumerated and validated —
// every one replayed (memory, lower bound), then simulated exhaustively or by branch and bound,
// on several threads, with the same result for any thread count.
#pragma once

#include <vector>

#include "tessera/core/mesh.hpp"
#include "tessera/sim/planner.hpp"

namespace tessera::sim::detail_plan {

/// A configuration whose mesh and layout core accepted; `index` is its enumeration position.
struct Candidate {
  PlanConfig config;
  core::DeviceMesh mesh;
  int index = 0;
};

/// A skipped configuration at its enumeration position (PlanResult::skipped keeps that order).
struct IndexedSkip {
  int index = 0;
  PlanSkip skip;
};

struct SearchInput {
  const PlanOptions& options;
  const Topology& topology;
  const DeviceCatalog& catalog;
  std::vector<Candidate> candidates;
  int total = 0;    ///< every enumerated configuration
  int skipped = 0;  ///< of them, those already skipped (their mesh or layout refused)
};

/// Fills res.entries (sorted), res.progress and res.cancelled; appends the candidates the replay
/// or the engine refused to `skips`.
void search(const SearchInput& in, PlanResult& res, std::vector<IndexedSkip>& skips);

/// The trainer's options for one configuration (planner.cpp).
nn::TrainOptions options_for(const nn::TrainOptions& base, const PlanConfig& c);

}  // namespace tessera::sim::detail_plan
