// The planner through the run layer: a RunSpec and the plan's own choices (meshes over how many
// devices, shard dimensions, checkpointing, precisions, compressions, a memory cap) resolved once
// into sim::plan's inputs, the ranked result, and its one JSON record (docs/records.md, "Plan")
// that `tessera plan --json`, tessera.sim.plan and the studio use, with the CLI's text table.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "tessera/run/spec.hpp"
#include "tessera/sim/planner.hpp"

namespace tessera::run {

/// What the planner varies and within which limits; the model, input, batch, topology and the
/// rest come from the RunSpec.
struct PlanChoices {
  int devices = 0;  ///< use the topology's first N devices; 0: all of them
  /// Memory limit per device, e.g. "80GB" (sim::parse_byte_size); empty: each device's capacity.
  std::string memory_cap;
  std::vector<std::string> shards = {"W", "H", "HW"};
  std::vector<std::string> checkpointing = {"none", "block", "stage"};
  /// Precisions to compare; empty: the RunSpec's one precision (which must then be its only one:
  /// a spec precision other than fp32 with a list here is refused as ambiguous).
  std::vector<std::string> precisions;
  /// Gradient compressions to compare (none, topk); empty: the RunSpec's grad_compression, with
  /// the same rule as precisions.
  std::vector<std::string> compressions;
  /// Pipeline stage counts to compare (the mesh dim "pp", sim::PlanOptions::pipeline_stages);
  /// empty: {1}, no pipeline.
  std::vector<int> pipeline_stages;
  /// Micro-batch counts to compare (sim::PlanOptions::micro_batches); empty: the RunSpec's
  /// micro_batches, with the same rule as precisions.
  std::vector<int> micro_batches;
  /// Simulate every candidate (sim::PlanOptions::exhaustive); otherwise branch and bound.
  bool exhaustive = false;
  int threads = 0;  ///< candidates evaluated at once; 0: every core
  /// How far the plan has got (sim::PlanOptions::progress: serialised, ~10 per second).
  std::function<void(const sim::PlanProgress&)> progress;
  /// When it becomes true, plan() returns soon with the candidates decided so far.
  const std::atomic<bool>* cancel = nullptr;
};

/// A finished plan and what it was planned for.
struct PlanRun {
  sim::PlanOptions options;  ///< sim::plan's inputs, as assembled from the spec and the choices
  std::string input;         ///< the spec's input, "CxHxW"
  std::string topology;      ///< the topology's name
  sim::PlanResult result;
  double wall_s = 0;  ///< how long sim::plan took (the CLI's table says it)

  /// The plan record (docs/records.md, "Plan"): {"model", "input", "batch", "topology",
  /// "devices", "memory_cap_bytes", "best_fit", "exhaustive", "simulated", "pruned",
  /// "cancelled", "configurations": [...], "skipped": [...],
  /// "compression_verdict" (only when configurations were planned both dense and with top-k)}.
  std::string to_json() const;
  /// The table `tessera plan` prints: a header, one row per configuration fastest first (with
  /// `top` > 0 only the `top` fastest and the fastest that fits), the compression verdict, the
  /// skipped candidates. Ends with a newline.
  std::string to_table(int top = 0) const;
};

/// Resolves `spec` (its mesh ignored: the planner chooses the mesh), assembles sim::plan's inputs
/// from it and `choices`, and plans. Throws InvalidArgument naming the field for a shard other
/// than W, H or HW, a memory cap that is not a positive size, a spec precision (or compression)
/// given together with a list of them, and whatever resolve_sim and sim::plan refuse.
PlanRun plan(const RunSpec& spec, const PlanChoices& choices);

}  // namespace tessera::run
