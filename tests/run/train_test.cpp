// run::train itself, on two local ranks of a tiny model for two steps: the step callback sees
// every rank's figures once a step, the metrics file holds exactly the records those figures
// give (the same as train_json's), a step's time is its slowest rank's, an alarm reaches its
// callback, its notice and its checkpoint, and the run's notices come through the callbacks.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "run/tiny_spec.hpp"
#include "records_doc.hpp"
#include "support/test_utils.hpp"
#include "tessera/run/step_record.hpp"
#include "tessera/run/train.hpp"

using namespace tessera;
using Json = nlohmann::json;
using test::TempDir;

namespace {


/// runtest::tiny_train_run(2) writing its metrics to `dir`/m.jsonl and its checkpoint to `dir`/ckpt.
run::RunSpec recorded_run(const TempDir& dir) {
  run::RunSpec s = runtest::tiny_train_run(2);
  s.set("metrics", dir.file("m.jsonl"));
  s.set("save", dir.file("ckpt"));
  return s;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

/// What the callbacks of one run saw.
struct Seen {
  std::vector<std::vector<nn::StepStats>> steps;
  std::vector<std::vector<run::Alarm>> step_alarms;
  std::vector<run::Alarm> alarms;
  std::vector<std::pair<core::ReportLevel, std::string>> notices;

  run::TrainCallbacks callbacks() {
    run::TrainCallbacks c;
    c.on_step = [this](const std::vector<nn::StepStats>& ranks,
                       const std::vector<run::Alarm>& fired) {
      steps.push_back(ranks);
      step_alarms.push_back(fired);
    };
    c.on_alarm = [this](const run::Alarm& a) { alarms.push_back(a); };
    c.on_notice = [this](core::ReportLevel level, const std::string& text) {
      notices.emplace_back(level, text);
    };
    return c;
  }
};

}  // namespace

TEST_CASE(
    "run::train calls back once a step with every rank's figures, as the metrics file records them",
    "[run]") {
  TempDir dir("tessera_train_test_records");
  run::RunSpec spec = recorded_run(dir);
  spec.set("metrics_port", "0");
  const run::TrainSetup setup = run::resolve_train(spec);
  Seen seen;
  const run::TrainResult r = run::train(setup, seen.callbacks());

  REQUIRE(seen.steps.size() == 2);
  for (std::size_t i = 0; i < seen.steps.size(); ++i) {
    REQUIRE(seen.steps[i].size() == 2);  // every rank's figures
    for (const nn::StepStats& rank : seen.steps[i]) {
      CHECK(rank.step == static_cast<std::int64_t>(i));
      CHECK(rank.step_time_s > 0);
      CHECK(rank.memory.peak_total > 0);
    }
    CHECK(seen.steps[i][0].loss == seen.steps[i][1].loss);  // replicated
  }
  REQUIRE(r.steps.size() == 2);
  CHECK(r.parameters > 0);

  // The metrics file: one record a line, each the one the callback's figures give.
  const std::vector<std::string> lines = lines_of(dir.file("m.jsonl"));
  REQUIRE(lines.size() == 2);
  const Json run_json = Json::parse(run::train_json(setup, r));
  const auto doc = test::doc_fields(test::records_doc_text(), "Training step");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    INFO("step " << i);
    CHECK(lines[i] == run::step_record(setup.train.batch, seen.steps[i], seen.step_alarms[i]));
    const Json rec = Json::parse(lines[i]);
    CHECK(run_json["steps"][i] == rec);  // --json and Python: the same record
    CHECK(test::record_mismatches(nlohmann::ordered_json::parse(lines[i]), doc).empty());
    // The step takes as long as its slowest rank; each rank's own time is beside it.
    const double t0 = seen.steps[i][0].step_time_s, t1 = seen.steps[i][1].step_time_s;
    CHECK(rec["step_time_s"].get<double>() == std::max(t0, t1));
    CHECK(rec["ranks"][0]["step_time_s"].get<double>() == t0);
    CHECK(rec["ranks"][1]["step_time_s"].get<double>() == t1);
    CHECK(rec["images_per_s"].get<double>() == 2 / std::max(t0, t1));
    CHECK(rec["ranks"][1]["peak_bytes"]["total"].get<std::size_t>() ==
          seen.steps[i][1].memory.peak_total);
  }

  // The checkpoint, and the live metrics' address as a notice (the library prints nothing).
  CHECK(std::filesystem::file_size(dir.file("ckpt")) > 0);
  REQUIRE(seen.notices.size() == 1);
  CHECK(seen.notices[0].first == core::ReportLevel::Info);
  CHECK(seen.notices[0].second.rfind("live metrics on http://127.0.0.1:", 0) == 0);
  CHECK(seen.alarms.empty());
}

TEST_CASE(
    "run::train passes a fired alarm to its callback, its notice, its record and its checkpoint",
    "[run]") {
  TempDir dir("tessera_train_test_alarm");
  run::RunSpec spec = recorded_run(dir);
  // Any two different gradient norms vary by more than 1e-9 of their mean: fires at step 1.
  spec.set("alarm",
           "grad_variance=1e-9:save,grad_norm=off,loss=off,step_time=off,warmup=1,window=2");
  const run::TrainSetup setup = run::resolve_train(spec);
  Seen seen;
  const run::TrainResult r = run::train(setup, seen.callbacks());

  REQUIRE(seen.alarms.size() == 1);
  const run::Alarm& a = seen.alarms[0];
  CHECK(a.kind == run::AlarmKind::GradVariance);
  CHECK(a.step == 1);
  CHECK(a.checkpoint == dir.file("ckpt") + ".alarm-step1");
  CHECK(std::filesystem::file_size(a.checkpoint) > 0);
  CHECK(std::filesystem::file_size(dir.file("ckpt")) > 0);
  REQUIRE(r.alarms.size() == 1);
  CHECK(r.alarms[0].message == a.message);
  // The step callback hears the step's alarms; its record and the metrics file carry them.
  REQUIRE(seen.step_alarms.size() == 2);
  CHECK(seen.step_alarms[0].empty());
  REQUIRE(seen.step_alarms[1].size() == 1);
  CHECK(seen.step_alarms[1][0].checkpoint == a.checkpoint);
  const std::vector<std::string> lines = lines_of(dir.file("m.jsonl"));
  REQUIRE(lines.size() == 2);
  CHECK(lines[1] == run::step_record(setup.train.batch, seen.steps[1], seen.step_alarms[1]));
  const Json rec = Json::parse(lines[1]);
  CHECK(rec["alarms"][0]["alarm"] == "grad_variance");
  CHECK(rec["alarms"][0]["checkpoint"] == a.checkpoint);
  CHECK_FALSE(Json::parse(lines[0]).contains("alarms"));
  CHECK(Json::parse(run::train_json(setup, r))["steps"][1] == rec);
  // The first alarm of a kind is a warning notice saying where the later ones go.
  REQUIRE(seen.notices.size() == 1);
  CHECK(seen.notices[0].first == core::ReportLevel::Warning);
  CHECK(seen.notices[0].second == a.message + "; checkpoint written to " + a.checkpoint +
                                      "; later alarms of this kind go to " + dir.file("m.jsonl") +
                                      " only");
}

TEST_CASE("run::train stops every rank after the step whose alarm says stop", "[run]") {
  run::RunSpec spec = runtest::tiny_train_run(2);
  spec.set("steps", "4");
  spec.set("alarm",
           "grad_variance=1e-9:stop,grad_norm=off,loss=off,step_time=off,warmup=1,window=2");
  Seen seen;
  REQUIRE_THROWS_AS(run::train(spec, seen.callbacks()), run::AlarmStopped);
  CHECK(seen.steps.size() == 2);  // the alarm's step is reported, then the run ends
  REQUIRE(seen.alarms.size() == 1);
  CHECK(seen.alarms[0].step == 1);
}
