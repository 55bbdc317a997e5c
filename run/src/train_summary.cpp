// The closing summary of a training run, as text (what `tessera train` prints) and as JSON (its
// --json and tessera.train's return value, with every step's record).
#include <algorithm>
#include <array>
#include <cstdio>
#include <sstream>

#include "step_record_json.hpp"
#include "tessera/run/train.hpp"

namespace tessera::run {

namespace {

std::string_view category(int c) {
  return core::mem_category_name(static_cast<core::MemCategory>(c));
}

/// Each step's slowest rank's figure `f`, from step `first` on, sorted.
template <class F>
std::vector<double> sorted_worst(const TrainResult& r, std::size_t first, F f) {
  std::vector<double> out;
  for (std::size_t i = first; i < r.steps.size(); ++i) {
    double worst = 0;
    for (const nn::StepStats& s : r.steps[i]) worst = std::max(worst, f(s));
    out.push_back(worst);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The loss and step time (the first step excluded when there are others); returns the median.
double head(std::ostream& os, const TrainSetup& cfg, const TrainResult& r) {
  const std::vector<double> times = sorted_worst(
      r, r.steps.size() > 1 ? 1 : 0, [](const nn::StepStats& s) { return s.step_time_s; });
  const double med = times[times.size() / 2];
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "\nsummary: %zu steps in %.1f s; %lld parameters; loss %.4f -> %.4f\n"
      "step time median %.3f s (min %.3f, max %.3f; first step excluded), %.2f images/s\n",
      r.steps.size(), r.wall_s, static_cast<long long>(r.parameters), r.steps.front()[0].loss,
      r.steps.back()[0].loss, med, times.front(), times.back(), cfg.train.batch / med);
  os << buf;
  return med;
}

/// The input pipeline: whether the loader kept up (the first step always waits for its batch).
void input_line(std::ostream& os, const TrainSetup& cfg, const TrainResult& r, double median_step) {
  const std::size_t first = r.steps.size() > 1 ? 1 : 0;
  const std::vector<double> wait =
      sorted_worst(r, first, [](const nn::StepStats& s) { return s.data_time_s; });
  const std::vector<double> load =
      sorted_worst(r, first, [](const nn::StepStats& s) { return s.load_time_s; });
  const double w = wait[wait.size() / 2], l = load[load.size() / 2];
  const data::LoaderOptions& lo = cfg.train.loader;
  char buf[256];
  if (lo.prefetch > 0)
    std::snprintf(
        buf, sizeof buf,
        "input: prefetch %d, %d loader thread(s) per rank; a batch loads in %.3f s, steps "
        "waited %.3f s for it (median)%s\n",
        lo.prefetch, lo.workers, l, w,
        w > 0.1 * median_step ? "; the loader does not keep up: add --loader-workers" : "");
  else
    std::snprintf(buf, sizeof buf,
                  "input: loaded in each step, %.3f s of it (median; --prefetch N loads ahead)\n",
                  w);
  os << buf;
}

/// With pipeline stages (a mesh dim pp): what the stages waited for each other, the bubble.
void pipeline_line(std::ostream& os, const TrainSetup& cfg, const TrainResult& r,
                   double median_step) {
  const int d = cfg.mesh.find_dim("pp");
  if (d < 0 || cfg.mesh.dim_size(d) < 2) return;
  const std::vector<double> wait = sorted_worst(
      r, r.steps.size() > 1 ? 1 : 0, [](const nn::StepStats& s) { return s.pipeline_wait_s; });
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "pipeline: %d stages, %d micro-batch(es), schedule %s; the rank that waited "
                "longest waited %.3f s of the %.3f s step (median)\n",
                cfg.mesh.dim_size(d), cfg.train.micro_batches,
                std::string(nn::pipeline_schedule_name(cfg.train.schedule)).c_str(),
                wait[wait.size() / 2], median_step);
  os << buf;
}

/// What rank 0's gradient collectives carried in the last step (the buffers handed to them).
void gradient_line(std::ostream& os, const TrainSetup& cfg, const nn::StepStats& g) {
  if (g.grad_dense_bytes <= 0) return;
  std::ostringstream how;
  if (cfg.train.grad_compression == nn::GradCompression::TopK)
    how << "top-k, ratio " << cfg.train.topk_ratio << ", all_gather of (index, value) pairs";
  else
    how << "all-reduce in " << nn::precision_name(cfg.train.grad_reduce);
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "gradient buckets per step: %.3f MiB on the wire of %.3f MiB dense (%.1fx less; %s)\n",
      g.grad_comm_bytes / 1048576.0, g.grad_dense_bytes / 1048576.0,
      double(g.grad_dense_bytes) / double(std::max<std::int64_t>(g.grad_comm_bytes, 1)),
      how.str().c_str());
  os << buf;
}

void alarms_line(std::ostream& os, const TrainSetup& cfg, const TrainResult& r) {
  if (r.alarms.empty()) return;
  std::array<int, kNumAlarmKinds> n{};
  for (const Alarm& a : r.alarms) ++n[std::size_t(a.kind)];
  os << "alarms:";
  for (int k = 0; k < kNumAlarmKinds; ++k)
    if (n[std::size_t(k)])
      os << " " << alarm_kind_name(static_cast<AlarmKind>(k)) << " " << n[std::size_t(k)];
  os << " (first at step " << r.alarms.front().step + 1
     << (cfg.metrics.empty() ? "" : "; each in " + cfg.metrics) << ")\n";
}

/// Each rank's totals.
std::vector<data::DataStats> data_totals(const TrainResult& r) {
  std::vector<data::DataStats> total;
  for (const auto& step : r.step_data) add_data_stats(total, step);
  return total;
}

/// A run on an image folder: what each rank decoded over the run (shard-only decoding shows as
/// a share of about 1/sp).
void data_lines(std::ostream& os, const TrainResult& r) {
  const std::vector<data::DataStats> total = data_totals(r);
  if (total.empty()) return;
  os << "images decoded per rank:\n";
  char buf[256];
  for (std::size_t q = 0; q < total.size(); ++q) {
    const data::DataStats& d = total[q];
    const double share = d.pixels_total > 0 ? double(d.pixels_decoded) / double(d.pixels_total) : 0;
    std::snprintf(buf, sizeof buf,
                  "  rank %zu: %.2f Mpx of %.2f Mpx in its files (%.0f%%), %lld file(s), decode "
                  "%.3f s; %lld bad sample(s) skipped, %lld label(s) ignored\n",
                  q, d.pixels_decoded / 1e6, d.pixels_total / 1e6, 100 * share,
                  static_cast<long long>(d.files), d.decode_s,
                  static_cast<long long>(d.bad_skipped), static_cast<long long>(d.labels_ignored));
    os << buf;
  }
}

/// The last step's peak memory of every rank, by category.
void memory_table(std::ostream& os, const std::vector<nn::StepStats>& last) {
  char buf[64];
  os << "peak memory per rank (MiB):\n  rank        total";
  for (int c = 0; c < core::kNumMemCategories; ++c) {
    std::snprintf(buf, sizeof buf, " %15s", std::string(category(c)).c_str());
    os << buf;
  }
  os << "\n";
  for (std::size_t q = 0; q < last.size(); ++q) {
    std::snprintf(buf, sizeof buf, "  %4zu %12.1f", q, last[q].memory.peak_total / 1048576.0);
    os << buf;
    for (int c = 0; c < core::kNumMemCategories; ++c) {
      std::snprintf(buf, sizeof buf, " %15.1f", last[q].memory.peak[c] / 1048576.0);
      os << buf;
    }
    os << "\n";
  }
}

/// The files the run wrote.
void files_lines(std::ostream& os, const TrainSetup& cfg, const TrainResult& r) {
  if (!cfg.trace.empty())
    os << "trace written to " << r.trace_path
       << (r.trace_path != cfg.trace || cfg.backend == "local"
               ? ""
               : " (this rank; the others beside it as .rank<r>)")
       << " (open in https://ui.perfetto.dev)\n";
  if (!cfg.metrics.empty()) os << "metrics written to " << cfg.metrics << "\n";
  if (!cfg.save.empty()) os << "checkpoint written to " << cfg.save << "\n";
}

/// init_from's report.
nlohmann::ordered_json weights_json(const std::string& path, const nn::WeightReport& w) {
  nlohmann::ordered_json j;
  j["path"] = path;
  j["naming"] = w.naming;
  j["loaded"] = w.loaded;
  j["missing"] = w.missing;
  j["unexpected"] = w.unexpected;
  j["replaced"] = w.replaced;
  j["summary"] = w.summary();
  return j;
}

}  // namespace

std::string training_summary(const TrainSetup& cfg, const TrainResult& r) {
  if (r.steps.empty()) return "no steps were run\n";
  std::ostringstream os;
  const double median_step = head(os, cfg, r);
  input_line(os, cfg, r, median_step);
  pipeline_line(os, cfg, r, median_step);
  gradient_line(os, cfg, r.steps.back()[0]);
  alarms_line(os, cfg, r);
  data_lines(os, r);
  memory_table(os, r.steps.back());
  files_lines(os, cfg, r);
  return os.str();
}

std::string train_json(const TrainSetup& setup, const TrainResult& r) {
  using Json = nlohmann::ordered_json;
  Json o;
  o["model"] = setup.train.model.name;
  o["mesh"] = setup.mesh.to_string();
  o["backend"] = setup.backend;
  o["rank"] = r.rank;
  o["parameters"] = r.parameters;
  o["wall_s"] = r.wall_s;
  Json steps = Json::array();
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const auto& ranks = r.steps[i];
    // The alarms of this step, as its line in the metrics file has them.
    std::vector<Alarm> fired;
    for (const Alarm& a : r.alarms)
      if (a.step == ranks.at(0).step) fired.push_back(a);
    steps.push_back(
        step_record_json(setup.train.batch, ranks, fired,
                         i < r.step_data.size() ? r.step_data[i] : std::vector<data::DataStats>{}));
  }
  o["steps"] = steps;
  if (!setup.init_from.empty()) o["init_from"] = weights_json(setup.init_from, r.weights);
  if (!r.step_data.empty()) {
    Json totals = Json::array();
    for (const data::DataStats& d : data_totals(r)) totals.push_back(data_stats_json(d));
    o["data"] = totals;
  }
  Json alarms = Json::array();
  for (const Alarm& a : r.alarms) alarms.push_back(Json::parse(alarm_json(a)));
  o["alarms"] = alarms;
  o["summary"] = training_summary(setup, r);
  return o.dump(1);
}

}  // namespace tessera::run
