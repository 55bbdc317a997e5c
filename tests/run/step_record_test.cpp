// The training step's record against its documentation: the table of docs/records.md,
// "Training step", lists every field with its JSON type; a record must have exactly those
// fields (an optional one only where its condition holds) with those types, so the page and
// run::step_record cannot drift apart.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "records_doc.hpp"
#include "support/catch.hpp"
#include "tessera/run/step_record.hpp"

using namespace tessera;
using Json = nlohmann::ordered_json;

namespace {

/// The mismatches between `record` and the table of "Training step", one per line ("" if none).
std::string mismatches(const Json& record) {
  std::string out;
  for (const std::string& m :
       test::record_mismatches(record, test::doc_fields(test::records_doc_text(), "Training step")))
    out += m + "\n";
  return out;
}

nn::StepStats rank_figures(double step_time_s, std::size_t peak) {
  nn::StepStats s;
  s.step = 7;
  s.loss = 1.25;
  s.grad_norm = 0.5;
  s.lr = 1e-3;
  s.step_time_s = step_time_s;
  s.data_time_s = 0.01;
  s.load_time_s = 0.02;
  s.pipeline_wait_s = step_time_s / 4;
  s.loss_scale = 65536;
  s.grad_comm_bytes = 1000;
  s.grad_dense_bytes = 2000;
  s.memory.peak_total = peak;
  for (int c = 0; c < core::kNumMemCategories; ++c) s.memory.peak[c] = peak / 8;
  return s;
}

}  // namespace

TEST_CASE("the training step's record has exactly the fields and types docs/records.md lists",
          "[run]") {
  REQUIRE(test::doc_fields(test::records_doc_text(), "Training step").size() > 20);
  const std::vector<nn::StepStats> ranks = {rank_figures(0.25, 4096), rank_figures(0.5, 8192)};
  SECTION("a step without alarms: every field but the optional ones") {
    const Json rec = Json::parse(run::step_record(4, ranks));
    CHECK(mismatches(rec) == "");
    CHECK_FALSE(rec.contains("alarms"));
    // The slowest rank's time at the top, each rank's beside it.
    CHECK(rec["step_time_s"] == 0.5);
    CHECK(rec["images_per_s"] == 8.0);
    CHECK(rec["ranks"][0]["step_time_s"] == 0.25);
    CHECK(rec["ranks"][1]["peak_bytes"]["total"] == 8192);
    CHECK(rec["ranks"][1]["pipeline_wait_s"] == 0.125);  // each rank's own, not the slowest's
  }
  SECTION("a step that fired an alarm with a checkpoint: every field") {
    run::Alarm a;
    a.kind = run::AlarmKind::Loss;
    a.action = run::AlarmAction::Save;
    a.step = 7;
    a.value = 5;
    a.baseline = 1;
    a.threshold = 4;
    a.message = "alarm loss at step 8: the loss 5 is 5x its median 1";
    a.checkpoint = "ckpt.alarm-step7";
    const Json rec = Json::parse(run::step_record(4, ranks, {a}));
    CHECK(mismatches(rec) == "");
    CHECK(rec["alarms"][0].contains("checkpoint"));  // the optional field is checked too
    CHECK(rec["alarms"].size() == 1);
  }
  SECTION("a step on an image folder: every rank's data object") {
    std::vector<data::DataStats> decoded(2);
    for (std::size_t r = 0; r < decoded.size(); ++r) {
      decoded[r].pixels_decoded = 1000 * std::int64_t(r + 1);
      decoded[r].pixels_total = 4000;
      decoded[r].decode_s = 0.01;
      decoded[r].files = 2;
      decoded[r].bytes_read = 512;
    }
    const Json rec = Json::parse(run::step_record(4, ranks, {}, decoded));
    CHECK(mismatches(rec) == "");
    CHECK(rec["ranks"][1]["data"]["pixels_decoded"] == 2000);
    CHECK(rec["ranks"][1]["data"]["decoded_share"] == 0.5);
  }
}
