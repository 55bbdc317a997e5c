// The phase comparison of a measured trace (`tessera train --trace`) with a simulated one (`tessera
// sim run --trace`, the studio): one training step broken into phases and layer groups, both
// traces through the same breakdown so the comparison is like for like; as a table and as JSON.
// Used by the studio's Compare view, `tessera sim compare` and tessera.sim.compare.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/trace.hpp"
#include "tessera/run/spec.hpp"

namespace tessera::run {

/// Phases of a training step. Compute phases come from the kernels' order within the step
/// (forward up to the loss, backward after it, optimizer: the ops of layer "optimizer"); halo and
/// collective phases are the time with at least one transfer or collective in flight.
enum Phase : int { kForward = 0, kBackward, kOptimizer, kHalo, kCollective, kNumPhases };

/// "forward", "backward", "optimizer", "halo exchange", "collectives".
std::string phase_label(int phase);

/// One trace's training step, in microseconds.
struct PhaseBreakdown {
  int ranks = 0;
  int steps = 0;       ///< training steps found (a step ends with its optimizer ops)
  int steps_used = 0;  ///< steps averaged: every step after the first when there are several
  double iteration_us = 0;                    ///< first event to last on any rank, mean over the steps used
  std::array<double, kNumPhases> phase_us{};  ///< per rank and step (mean over ranks and steps used)
  /// Kernel time per layer group ("stem", "stages.0", ..., "head", "loss", "optimizer"), per rank
  /// and step, in the order the groups first run.
  std::vector<std::pair<std::string, double>> group_us;
};

/// Breaks a trace in core's schema into steps and phases. Throws InvalidArgument when it holds no
/// compute events (nothing to break down) or when ranks ran different numbers of steps.
PhaseBreakdown phase_breakdown(const std::vector<core::TraceEvent>& trace);

/// The layer group of a module path: "stages.1" for "stages.1.blocks.0.dwconv", else the first
/// component ("stem", "head", "loss", "optimizer"); "(none)" for an empty path.
std::string layer_group(const std::string& layer);

struct CompareRow {
  std::string label;
  bool group = false;  ///< a layer-group row (below the phases)
  double measured_us = 0, simulated_us = 0;
  /// (simulated − measured) / measured · 100; NaN when nothing was measured.
  double error_pct() const;
};

/// A measured trace beside the simulated one: the iteration, every phase, every layer group.
struct Comparison {
  PhaseBreakdown measured, simulated;
  std::vector<CompareRow> rows;
  std::string measured_source;  ///< otherData of the measured trace: "tessera train: convnext-atto sp=2 [3,32,64]"
  std::string mismatch;         ///< non-empty when the measured run's model, mesh or input differ from the simulated

  /// {"measured_source", "mismatch", "measured": {breakdown}, "simulated": {breakdown},
  ///  "rows": [{"label", "group", "measured_us", "simulated_us", "error_pct" (null: nothing measured)}]}
  std::string to_json() const;
  /// The rows as an aligned text table (label, measured, simulated, error).
  std::string table() const;
};

/// Compares `measured` (read with core::read_chrome_trace) with the simulated trace of a
/// configuration (model name, mesh text, C×H×W input, as the simulated run describes them).
Comparison compare_traces(const core::ChromeTrace& measured, const std::vector<core::TraceEvent>& simulated,
                          const std::string& model, const std::string& mesh, const std::string& input);

/// A measured trace file against a simulated trace file (`tessera sim run --trace`), whose
/// otherData names the model, mesh and input compared. Throws InvalidArgument naming a file that
/// is missing or malformed.
Comparison compare_trace_files(const std::string& measured, const std::string& simulated);

/// A measured trace file against the simulation of `spec` (every rank simulated, with its trace).
Comparison compare_with_simulation(const std::string& measured, const RunSpec& spec);

}  // namespace tessera::run
