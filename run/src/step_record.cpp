// The training step's record: written here only, so the metrics file, `tessera train --json` and
// Python show the same fields (docs/records.md, "Training step"; tests/run/step_record_test.cpp
// checks the two agree).
#include "tessera/run/step_record.hpp"

#include <algorithm>

#include "step_record_json.hpp"
#include "tessera/core/error.hpp"

namespace tessera::run {

namespace {

using Json = nlohmann::ordered_json;

/// One rank's own figures: its times and its allocator's peaks ("total" and each category).
Json rank_json(std::size_t rank, const nn::StepStats& r) {
  Json peak;
  peak["total"] = r.memory.peak_total;
  for (int c = 0; c < core::kNumMemCategories; ++c)
    peak[std::string(core::mem_category_name(static_cast<core::MemCategory>(c)))] =
        r.memory.peak[c];
  Json j;
  j["rank"] = rank;
  j["step_time_s"] = r.step_time_s;
  j["data_time_s"] = r.data_time_s;
  j["load_time_s"] = r.load_time_s;
  j["pipeline_wait_s"] = r.pipeline_wait_s;
  j["peak_bytes"] = std::move(peak);
  return j;
}

/// Where the job stood when the step ran: its round, the restarts used, the round's members.
Json elastic_json(const ElasticRound& e) {
  Json j;
  j["round"] = e.round;
  j["restarts"] = e.restarts;
  j["members"] = e.members;
  return j;
}

}  // namespace

Json data_stats_json(const data::DataStats& d) {
  Json j;
  j["pixels_decoded"] = d.pixels_decoded;
  j["pixels_total"] = d.pixels_total;
  // The share of its files' pixels a rank decoded: about 1/sp with shard-only decoding.
  j["decoded_share"] = d.pixels_total > 0 ? double(d.pixels_decoded) / double(d.pixels_total) : 0.0;
  j["decode_s"] = d.decode_s;
  j["bad_skipped"] = d.bad_skipped;
  j["labels_ignored"] = d.labels_ignored;
  j["files"] = d.files;
  j["bytes_read"] = d.bytes_read;
  return j;
}

void add_data_stats(std::vector<data::DataStats>& total, const std::vector<data::DataStats>& step) {
  total.resize(step.size());
  for (std::size_t r = 0; r < step.size(); ++r) total[r] += step[r];
}

Json step_record_json(int batch, const std::vector<nn::StepStats>& ranks,
                      const std::vector<Alarm>& alarms, const std::vector<data::DataStats>& data,
                      const std::optional<ElasticRound>& elastic) {
  TESSERA_CHECK(!ranks.empty(), "run: a step record needs the figures of at least one rank");
  TESSERA_CHECK(data.empty() || data.size() == ranks.size(), "run: a step record has ",
                ranks.size(), " ranks' figures but ", data.size(), " ranks' data figures");
  // The step takes as long as its slowest rank: the others wait for it at the next collective.
  double step_time = 0, data_time = 0, load_time = 0;
  for (const nn::StepStats& r : ranks) {
    step_time = std::max(step_time, r.step_time_s);
    data_time = std::max(data_time, r.data_time_s);
    load_time = std::max(load_time, r.load_time_s);
  }
  const nn::StepStats& s = ranks[0];
  Json d;
  d["step"] = s.step;
  d["loss"] = s.loss;
  d["step_time_s"] = step_time;
  d["data_time_s"] = data_time;
  d["load_time_s"] = load_time;
  d["images_per_s"] = batch / step_time;
  d["lr"] = s.lr;
  d["grad_norm"] = s.grad_norm;
  d["loss_scale"] = s.loss_scale;
  d["skipped"] = s.skipped;
  d["skipped_steps"] = s.skipped_steps;
  d["grad_comm_bytes"] = s.grad_comm_bytes;
  d["grad_dense_bytes"] = s.grad_dense_bytes;
  Json per_rank = Json::array();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    per_rank.push_back(rank_json(r, ranks[r]));
    if (!data.empty()) per_rank.back()["data"] = data_stats_json(data[r]);
  }
  d["ranks"] = std::move(per_rank);
  if (!alarms.empty()) {
    Json fired = Json::array();
    for (const Alarm& a : alarms) fired.push_back(Json::parse(alarm_json(a)));
    d["alarms"] = std::move(fired);
  }
  if (elastic) d["elastic"] = elastic_json(*elastic);
  return d;
}

std::string step_record(int batch, const std::vector<nn::StepStats>& ranks,
                        const std::vector<Alarm>& alarms, const std::vector<data::DataStats>& data,
                        const std::optional<ElasticRound>& elastic) {
  return step_record_json(batch, ranks, alarms, data, elastic).dump();
}

}  // namespace tessera::run
