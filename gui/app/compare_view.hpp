// Compare: a measured run's trace (`tessera train --trace`) beside the simulated iteration of the
// panel's configuration — per phase and per layer group, measured and simulated side by side, and
// the simulation's error. The breakdown is the run layer's (tessera/run/phase_compare.hpp); this only paints it.
#pragma once

#include <optional>

#include "tessera/run/phase_compare.hpp"
#include "views_common.hpp"

namespace tessera::studio {

class CompareView : public SnapshotView {
  Q_OBJECT
 public:
  explicit CompareView(QWidget* parent = nullptr);
  /// Reads a measured trace (core::read_chrome_trace_file) and compares it with the current
  /// snapshot. Throws InvalidArgument with the reader's message for a malformed file.
  void openMeasured(const QString& path);
  /// The comparison shown (none until a measured trace and a snapshot are both there).
  const std::optional<run::Comparison>& comparison() const { return comparison_; }
  QString error() const { return error_; }

 protected:
  void snapshotChanged() override;
  void paintEvent(QPaintEvent*) override;

 private:
  void recompute();
  std::optional<core::ChromeTrace> measured_;
  QString measuredPath_;
  std::optional<run::Comparison> comparison_;
  QString error_;
};

}  // namespace tessera::studio
