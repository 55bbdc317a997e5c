// One simulated training iteration of a RunSpec — the folded meta replay of the real trainer and
// the event engine — with the one JSON form of its result that `tessera sim run --json`, the
// Python module's to_dict() and tessera studio print, and its Chrome trace.
#pragma once

#include <string>

#include "tessera/run/resolve.hpp"
#include "tessera/run/spec.hpp"
#include "tessera/sim/engine.hpp"

namespace tessera::run {

/// A simulated iteration and what it was simulated on.
struct SimRun {
  SimSetup setup;
  sim::SimResult result;

  /// {"model", "mesh", "topology", "iteration_time_s", "iteration_ps", "simulated_ranks",
  ///  "devices": [{"rank", "coords", "device", "simulated_as", "peak_memory_bytes",
  ///  "memory_bytes": {category: bytes}, "capacity_bytes", "compute_busy_s", "comm_busy_s"}],
  ///  "links": [{"from", "to", "kind", "bytes", "utilisation"}]}: the figures only (no trace).
  std::string to_json() const;
  /// The timeline as Chrome-trace JSON (core's schema), with `source` in its otherData.
  std::string trace_json(const std::string& source) const;
};

/// The JSON of SimRun::to_json for a result simulated on `setup` elsewhere (the studio).
std::string result_json(const SimSetup& setup, const sim::SimResult& result);

/// Replays `setup`'s training step on meta tensors, one replay per class of equivalent ranks
/// (sim::replay_folded), and simulates the iteration. `every_rank`: simulate every rank (the
/// trace then has a lane per device); otherwise one slab per kind of equivalent rank, the same
/// figures in a fraction of the time. `keep_trace`: fill result.trace.
SimRun simulate(SimSetup setup, bool every_rank, bool keep_trace);

/// What the CLI and Python do: resolve_sim(spec), then fold unless a trace is wanted
/// (spec.trace non-empty, or `keep_trace`); with spec.trace the Chrome trace is written there
/// (atomically), `source` naming the front end in it.
SimRun simulate(const RunSpec& spec, bool keep_trace = false, const std::string& source = "tessera sim run");

}  // namespace tessera::run
