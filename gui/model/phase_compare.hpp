// The compare view's data: one training step of a trace (measured by `tessera train --trace` or
// simulated) broken into phases and layer groups, and a measured trace set beside a simulated one.
// Both traces go through the same breakdown, so the comparison is like for like.
#pragma once

#include <QString>
#include <array>
#include <vector>

#include "tessera/core/trace.hpp"

namespace tessera::studio {

/// Phases of a training step. Compute phases come from the kernels' order within the step
/// (forward up to the loss, backward after it, optimizer: the ops of layer "optimizer"); halo and
/// collective phases are the time with at least one transfer or collective in flight.
enum Phase : int { kForward = 0, kBackward, kOptimizer, kHalo, kCollective, kNumPhases };

/// "forward", "backward", "optimizer", "halo exchange", "collectives".
QString phaseLabel(int phase);

/// One trace's training step, in microseconds.
struct PhaseBreakdown {
  int ranks = 0;
  int steps = 0;      ///< training steps found (a step ends with its optimizer ops)
  int stepsUsed = 0;  ///< steps averaged: every step after the first when there are several
  double iterationUs = 0;  ///< first event to last on any rank, mean over the steps used
  std::array<double, kNumPhases> phaseUs{};  ///< per rank and step (mean over ranks and steps used)
  /// Kernel time per layer group ("stem", "stages.0", ..., "head", "loss", "optimizer"), per rank
  /// and step, in the order the groups first run.
  std::vector<std::pair<QString, double>> groupUs;
};

/// Breaks a trace in core's schema into steps and phases. Throws InvalidArgument when it holds no
/// compute events (nothing to break down).
PhaseBreakdown phaseBreakdown(const std::vector<core::TraceEvent>& trace);

/// The layer group of a module path: "stages.1" for "stages.1.blocks.0.dwconv", else the first
/// component ("stem", "head", "loss", "optimizer").
QString layerGroup(const std::string& layer);

struct CompareRow {
  QString label;
  bool group = false;  ///< a layer-group row (below the phases)
  double measuredUs = 0, simulatedUs = 0;
  /// (simulated − measured) / measured · 100; NaN when nothing was measured.
  double errorPct() const;
};

/// A measured trace beside the simulated one: the iteration, every phase, every layer group.
struct Comparison {
  PhaseBreakdown measured, simulated;
  std::vector<CompareRow> rows;
  QString measuredSource;  ///< otherData of the measured trace: "tessera train: convnext-atto sp=2 [3,32,64]"
  QString mismatch;        ///< non-empty when the measured run's model, mesh or input differ from the simulated
};

/// Compares `measured` (read with core::read_chrome_trace) with the simulated trace of a
/// configuration (model name, mesh text, C×H×W input as the studio shows them).
Comparison compareTraces(const core::ChromeTrace& measured, const std::vector<core::TraceEvent>& simulated,
                         const QString& model, const QString& mesh, const QString& input);

}  // namespace tessera::studio
