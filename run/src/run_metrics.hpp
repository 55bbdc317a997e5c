// Rank 0's outputs of a run's figures as it goes: the metrics file (one step record a line,
// rewritten atomically after every step) and the live Prometheus text (served over HTTP with
// --metrics-port and/or written to --metrics-textfile).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "step_gather.hpp"
#include "tessera/run/live_metrics.hpp"
#include "tessera/run/train.hpp"

namespace tessera::run {

/// Sends a notice to `callbacks.on_notice`, or to core::report without one.
void notify(const TrainCallbacks& callbacks, core::ReportLevel level, const std::string& text);

class RunMetrics {
 public:
  /// Starts the live metrics server when setup.metrics_port >= 0 (publishing the run's names
  /// before any step) and notices its address (Info). Throws BackendError when the port cannot
  /// be bound, InvalidArgument when a TESSERA_ELASTIC_* variable is malformed.
  RunMetrics(const TrainSetup& setup, const TrainCallbacks& callbacks);
  ~RunMetrics();

  /// A completed step: its record, with the alarms it fired and what each rank decoded (empty
  /// when the run decodes no files), is appended to the metrics file.
  void add_step(const std::vector<nn::StepStats>& ranks, const std::vector<Alarm>& fired,
                const std::vector<data::DataStats>& data);
  /// A step that did not complete (non-finite): each alarm is a line of its own.
  void add_alarm_lines(const std::vector<Alarm>& fired);
  /// Publishes the step's live figures (server and textfile), with the alarms fired so far.
  void publish(const Gathered& step, const std::array<std::int64_t, kNumAlarmKinds>& alarm_counts);

 private:
  void write_file();
  const TrainSetup& setup_;
  std::string text_;  ///< the metrics file's lines so far
  /// The elastic round this process runs in (its environment, from tessera launch), if any: its
  /// step records and live series say so.
  const std::optional<ElasticRound> elastic_;
  bool live_ = false;
  LiveFigures figures_;
  std::unique_ptr<MetricsServer> server_;
};

}  // namespace tessera::run
