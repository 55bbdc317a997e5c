// Rank 0's metrics: the metrics file of step records and the live Prometheus text.
#include "run_metrics.hpp"

#include <filesystem>

#include "step_record_json.hpp"
#include "tessera/core/file_io.hpp"

namespace tessera::run {

void notify(const TrainCallbacks& callbacks, core::ReportLevel level, const std::string& text) {
  if (callbacks.on_notice)
    callbacks.on_notice(level, text);
  else
    core::report(level, text);
}

RunMetrics::RunMetrics(const TrainSetup& setup, const TrainCallbacks& callbacks)
    : setup_(setup), elastic_(elastic_round_from_env()) {
  // A later round of an elastic job goes on in the metrics file its predecessors wrote (each
  // record names its round, so steps a round redid can be told apart) instead of replacing it.
  std::error_code ec;
  if (elastic_ && elastic_->round > 0 && !setup.metrics.empty() &&
      std::filesystem::is_regular_file(setup.metrics, ec))
    text_ = core::read_file(setup.metrics);
  live_ = setup.metrics_port >= 0 || !setup.metrics_textfile.empty();
  if (!live_) return;
  figures_.elastic = elastic_;
  figures_.model = setup.train.model.name;
  figures_.mesh = setup.mesh.to_string();
  figures_.backend = setup.backend;
  figures_.batch = setup.train.batch;
  if (setup.metrics_port >= 0) {
    server_ = std::make_unique<MetricsServer>(setup.metrics_port);
    server_->publish(prometheus_text(figures_));
    notify(callbacks, core::ReportLevel::Info,
           "live metrics on http://127.0.0.1:" + std::to_string(server_->port()) + "/metrics");
  }
}

RunMetrics::~RunMetrics() = default;

void RunMetrics::write_file() { core::write_file_atomic(setup_.metrics, text_); }

void RunMetrics::add_step(const std::vector<nn::StepStats>& ranks, const std::vector<Alarm>& fired,
                          const std::vector<data::DataStats>& data) {
  if (setup_.metrics.empty()) return;
  text_ += step_record(setup_.train.batch, ranks, fired, data, elastic_) + "\n";
  write_file();
}

void RunMetrics::add_alarm_lines(const std::vector<Alarm>& fired) {
  if (setup_.metrics.empty() || fired.empty()) return;
  for (const Alarm& a : fired) text_ += alarm_json(a) + "\n";
  write_file();
}

void RunMetrics::publish(const Gathered& step,
                         const std::array<std::int64_t, kNumAlarmKinds>& alarm_counts) {
  if (!live_) return;
  const std::size_t n = step.bytes.size();
  figures_.ranks = step.ranks;
  figures_.halo_bytes.assign(n, 0);
  figures_.collective_bytes.assign(n, 0);
  figures_.halo_bytes_total.resize(n, 0);
  figures_.collective_bytes_total.resize(n, 0);
  for (std::size_t r = 0; r < n; ++r) {
    figures_.halo_bytes[r] = step.bytes[r][0];
    figures_.collective_bytes[r] = step.bytes[r][1];
    figures_.halo_bytes_total[r] += step.bytes[r][0];
    figures_.collective_bytes_total[r] += step.bytes[r][1];
  }
  if (setup_.images) add_data_stats(figures_.data_total, step.data);
  figures_.alarms = alarm_counts;
  const std::string text = prometheus_text(figures_);
  if (!setup_.metrics_textfile.empty()) core::write_file_atomic(setup_.metrics_textfile, text);
  if (server_) server_->publish(text);
}

}  // namespace tessera::run
