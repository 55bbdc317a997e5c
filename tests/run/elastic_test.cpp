// Elastic jobs' figures (run/include/tessera/run/elastic.hpp): a round's environment read back
// as written and refused when malformed, the launcher's round record against docs/records.md,
// its Prometheus series against sums worked out by hand, and a rank's step records and live
// series with and without a round (outside elastic jobs they stay as they were).
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "run/tiny_spec.hpp"
#include "records_doc.hpp"
#include "support/catch.hpp"
#include "support/test_utils.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/elastic.hpp"
#include "tessera/run/live_metrics.hpp"
#include "tessera/run/step_record.hpp"
#include "tessera/run/train.hpp"

using namespace tessera;
using Json = nlohmann::ordered_json;

namespace {

using Env = std::map<std::string, std::string>;

/// The NAME=value lines as a map, each name once.
Env env_map(const std::vector<std::string>& lines) {
  Env env;
  for (const std::string& line : lines) {
    const auto eq = line.find('=');
    REQUIRE(eq != std::string::npos);
    REQUIRE(env.emplace(line.substr(0, eq), line.substr(eq + 1)).second);
  }
  return env;
}

std::optional<run::ElasticRound> read_env(const Env& env) {
  return run::elastic_round_from_env([&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

/// The InvalidArgument read_env throws for `env` ("<no exception>" if none).
std::string refusal(const Env& env) {
  return test::error_of([&] { read_env(env); });
}

/// The process's environment holds `lines` (NAME=value) until the end of the scope. ctest runs
/// each test case in a process of its own, so no other test sees them.
struct ScopedEnv {
  explicit ScopedEnv(const std::vector<std::string>& lines) : env(env_map(lines)) {
    for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : env) ::unsetenv(name.c_str());
  }
  Env env;
};

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

run::ElasticRound sample_round() {
  run::ElasticRound r;
  r.round = 3;
  r.restarts = 3;
  r.max_restarts = 5;
  r.members = 6;
  r.time_lost_s = 41.123456789012345;  // needs 17 digits to read back
  r.steps_lost = 12345678901234;       // past 32 bits
  return r;
}

/// One sample of Prometheus text: its family's TYPE and HELP and its value.
struct Series {
  std::string type, help;
  double value = 0;
  int samples = 0;
};

/// Prometheus text (series without labels) by name, from the HELP, TYPE and sample lines.
std::map<std::string, Series> parse_prometheus(const std::string& text) {
  std::map<std::string, Series> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string first, name;
    words >> first;
    if (first == "#") {
      std::string what;
      words >> what >> name;
      std::string rest;
      std::getline(words, rest);
      (what == "TYPE" ? out[name].type : out[name].help) = rest.empty() ? "" : rest.substr(1);
    } else {
      Series& s = out[first];
      s.value = std::strtod(line.substr(first.size() + 1).c_str(), nullptr);
      ++s.samples;
    }
  }
  return out;
}

nn::StepStats rank_figures(double step_time_s) {
  nn::StepStats s;
  s.step = 4;
  s.loss = 2.5;
  s.lr = 0.01;
  s.step_time_s = step_time_s;
  s.memory.peak_total = 1024;
  return s;
}

}  // namespace

TEST_CASE("an elastic round reads back from the environment the launcher writes", "[run]") {
  const run::ElasticRound r = sample_round();
  const Env env = env_map(run::elastic_env(r));
  CHECK(env.size() == 6);
  for (const char* name :
       {"TESSERA_ELASTIC_ROUND", "TESSERA_ELASTIC_RESTARTS", "TESSERA_ELASTIC_MAX_RESTARTS",
        "TESSERA_ELASTIC_MEMBERS", "TESSERA_ELASTIC_TIME_LOST_S", "TESSERA_ELASTIC_STEPS_LOST"})
    CHECK(env.count(name) == 1);
  CHECK(env.at("TESSERA_ELASTIC_STEPS_LOST") == "12345678901234");
  const std::optional<run::ElasticRound> back = read_env(env);
  REQUIRE(back);
  CHECK(back->round == 3);
  CHECK(back->restarts == 3);
  CHECK(back->max_restarts == 5);
  CHECK(back->members == 6);
  CHECK(back->time_lost_s == r.time_lost_s);  // bit for bit
  CHECK(back->steps_lost == r.steps_lost);

  SECTION("without TESSERA_ELASTIC_ROUND the process is in no elastic job") {
    Env rest = env;
    rest.erase("TESSERA_ELASTIC_ROUND");
    CHECK_FALSE(read_env(rest));
    CHECK_FALSE(read_env({}));
  }
}

TEST_CASE("a malformed elastic variable is refused naming the variable and its value", "[run]") {
  const Env good = env_map(run::elastic_env(sample_round()));
  const auto [name, value] = GENERATE(table<std::string, std::string>({
      {"TESSERA_ELASTIC_ROUND", "x"},
      {"TESSERA_ELASTIC_ROUND", "-1"},
      {"TESSERA_ELASTIC_ROUND", ""},
      {"TESSERA_ELASTIC_RESTARTS", "2.5"},
      {"TESSERA_ELASTIC_MAX_RESTARTS", "3 "},
      {"TESSERA_ELASTIC_MEMBERS", "0"},
      {"TESSERA_ELASTIC_MEMBERS", "99999999999"},
      {"TESSERA_ELASTIC_TIME_LOST_S", "nan"},
      {"TESSERA_ELASTIC_TIME_LOST_S", "-0.5"},
      {"TESSERA_ELASTIC_TIME_LOST_S", "12s"},
      {"TESSERA_ELASTIC_STEPS_LOST", "1e3"},
  }));
  INFO(name << "='" << value << "'");
  Env env = good;
  env[name] = value;
  const std::string why = refusal(env);
  CHECK(why.find(name + "='" + value + "'") != std::string::npos);

  SECTION("a variable missing beside TESSERA_ELASTIC_ROUND is named") {
    Env missing = good;
    missing.erase("TESSERA_ELASTIC_MEMBERS");
    const std::string why_missing = refusal(missing);
    CHECK(why_missing.find("TESSERA_ELASTIC_MEMBERS is not set") != std::string::npos);
  }
}

TEST_CASE("an elastic round record is one line with every field of docs/records.md", "[run]") {
  run::RoundRecord r;
  r.round = 2;
  r.world = 4;
  r.members = 2;
  r.started_s = 1765012345.123456;
  r.first_step_s = 1765012351.654321;
  r.resumed_step = 200;
  r.last_step = 431;
  r.last_step_s = 1765012998.25;
  r.ended = "rank 2 lost: killed by signal 9";
  r.ended_s = 1765012999.000001;
  r.restart_s = 7.75;
  r.time_lost_s = 19.0625;
  r.steps_lost = 37;
  const std::string line = run::round_json(r);
  CHECK(line.find('\n') == std::string::npos);
  const Json j = Json::parse(line);

  // The page's table, "number or null" read as number: every time here is known.
  auto doc = test::doc_fields(test::records_doc_text(), "Elastic round");
  CHECK(doc.size() == 13);
  for (auto& [field, d] : doc)
    if (d.type == "number or null") d.type = "number";
  CHECK(test::record_mismatches(j, doc).empty());

  CHECK(j["round"] == 2);
  CHECK(j["world"] == 4);
  CHECK(j["members"] == 2);
  CHECK(j["started_s"].get<double>() == r.started_s);  // microseconds of a unix time kept
  CHECK(j["first_step_s"].get<double>() == r.first_step_s);
  CHECK(j["resumed_step"] == 200);
  CHECK(j["last_step"] == 431);
  CHECK(j["last_step_s"].get<double>() == r.last_step_s);
  CHECK(j["ended"] == r.ended);
  CHECK(j["ended_s"].get<double>() == r.ended_s);
  CHECK(j["restart_s"].get<double>() == 7.75);
  CHECK(j["time_lost_s"].get<double>() == 19.0625);
  CHECK(j["steps_lost"] == 37);

  SECTION("unknown times are null") {
    r.first_step_s = r.last_step_s = r.restart_s = r.time_lost_s = -1;
    const Json u = Json::parse(run::round_json(r));
    CHECK(u["first_step_s"].is_null());
    CHECK(u["last_step_s"].is_null());
    CHECK(u["restart_s"].is_null());
    CHECK(u["time_lost_s"].is_null());
    CHECK(u["started_s"].get<double>() == r.started_s);
    CHECK(u.size() == 13);
  }
}

TEST_CASE("the launcher's elastic series follow its rounds", "[run]") {
  // Three rounds: the first ended by a lost rank, the second by a joining member (its catch-up
  // was seen: 20.5 s lost, 30 steps), the third running, not yet back where the second was.
  std::vector<run::RoundRecord> rounds(3);
  rounds[0] = {0, 4, 4, 100.0, 101.0, 0, 120, 149.0, "rank 3 lost", 150.0, -1, -1, 0};
  rounds[1] = {1, 3, 3, 151.0, 155.5, 100, 260, 299.0, "member joined", 300.0, 5.5, 20.5, 20};
  rounds[2] = {2, 4, 4, 301.0, -1, 250, 250, 320.0, "", 0, -1, -1, 10};
  const std::map<std::string, Series> s =
      parse_prometheus(run::elastic_prometheus_text(rounds, 2, 3));
  const std::map<std::string, double> expected = {
      {"tessera_elastic_round", 2},
      {"tessera_elastic_restarts_total", 2},
      {"tessera_elastic_max_restarts", 3},
      {"tessera_elastic_members", 4},
      {"tessera_elastic_world_size", 4},
      {"tessera_elastic_steps_lost_total", 30},           // 0 + 20 + 10
      {"tessera_elastic_time_lost_seconds_total", 20.5},  // the third round's is not known yet
      {"tessera_elastic_last_restart_seconds", 5.5},      // the second round's: the third has none
      {"tessera_elastic_last_step", 250},
  };
  CHECK(s.size() == expected.size());
  for (const auto& [name, value] : expected) {
    INFO(name);
    REQUIRE(s.count(name) == 1);
    const Series& series = s.at(name);
    CHECK(series.samples == 1);
    CHECK(series.value == value);
    CHECK_FALSE(series.help.empty());
    const bool counter = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
    CHECK(series.type == (counter ? "counter" : "gauge"));
  }

  SECTION("no restart seen yet: no last restart, and no rounds at all give zeros") {
    const auto first = parse_prometheus(run::elastic_prometheus_text({rounds[0]}, 0, 3));
    CHECK(first.count("tessera_elastic_last_restart_seconds") == 0);
    CHECK(first.at("tessera_elastic_time_lost_seconds_total").value == 0);
    const auto none = parse_prometheus(run::elastic_prometheus_text({}, 0, 3));
    CHECK(none.at("tessera_elastic_members").value == 0);
    CHECK(none.at("tessera_elastic_max_restarts").value == 3);
  }
  SECTION("a negative restart count is refused") {
    CHECK_THROWS_AS(run::elastic_prometheus_text(rounds, -1, 3), InvalidArgument);
  }
}

TEST_CASE("a rank's live metrics show its elastic round only in an elastic job", "[run]") {
  run::LiveFigures f;
  f.model = "m";
  f.ranks = {rank_figures(0.5), rank_figures(0.25)};
  f.batch = 2;
  const std::string plain = run::prometheus_text(f);
  CHECK(plain.find("tessera_elastic") == std::string::npos);

  f.elastic = sample_round();
  const std::string text = run::prometheus_text(f);
  REQUIRE(text.compare(0, plain.size(), plain) == 0);  // the run's own series unchanged
  const auto s = parse_prometheus(text.substr(plain.size()));
  CHECK(s.size() == 5);
  CHECK(s.at("tessera_elastic_round").value == 3);
  CHECK(s.at("tessera_elastic_restarts_total").value == 3);
  CHECK(s.at("tessera_elastic_members").value == 6);
  CHECK(s.at("tessera_elastic_time_lost_seconds_total").value == f.elastic->time_lost_s);
  CHECK(s.at("tessera_elastic_steps_lost_total").value == 12345678901234.0);
  CHECK(s.at("tessera_elastic_steps_lost_total").type == "counter");
}

TEST_CASE("a step record gains its elastic round only in an elastic job", "[run]") {
  const std::vector<nn::StepStats> ranks = {rank_figures(0.5), rank_figures(0.25)};
  const auto doc = test::doc_fields(test::records_doc_text(), "Training step");
  const Json plain = Json::parse(run::step_record(2, ranks));
  CHECK_FALSE(plain.contains("elastic"));
  CHECK(test::record_mismatches(plain, doc).empty());

  Json with = Json::parse(run::step_record(2, ranks, {}, {}, sample_round()));
  CHECK(test::record_mismatches(with, doc).empty());
  CHECK(with["elastic"]["round"] == 3);
  CHECK(with["elastic"]["restarts"] == 3);
  CHECK(with["elastic"]["members"] == 6);
  CHECK(with["elastic"].size() == 3);
  with.erase("elastic");
  CHECK(with.dump() == plain.dump());  // nothing else changed
}

TEST_CASE("run::train in an elastic round writes the round in its records and live series",
          "[run]") {
  test::TempDir dir("tessera_elastic_test");
  run::RunSpec spec = runtest::tiny_train_run(2);
  spec.set("metrics", dir.file("m.jsonl"));
  spec.set("metrics_textfile", dir.file("live.prom"));
  ScopedEnv env(run::elastic_env(sample_round()));

  SECTION("every step record and the live text say which round") {
    run::train(spec);
    const std::vector<std::string> lines = lines_of(dir.file("m.jsonl"));
    REQUIRE(lines.size() == 2);
    for (const std::string& line : lines) {
      const Json rec = Json::parse(line);
      CHECK(rec["elastic"] == Json::parse(R"({"round":3,"restarts":3,"members":6})"));
    }
    std::ifstream in(dir.file("live.prom"));
    std::stringstream text;
    text << in.rdbuf();
    const auto s = parse_prometheus(text.str());
    REQUIRE(s.count("tessera_elastic_round") == 1);
    CHECK(s.at("tessera_elastic_round").value == 3);
    CHECK(s.at("tessera_elastic_members").value == 6);
    CHECK(s.at("tessera_steps_completed").value == 2);
  }
  SECTION("a malformed round stops the run before its first step, naming the variable") {
    ::setenv("TESSERA_ELASTIC_MEMBERS", "six", 1);
    const std::string why = test::error_of([&] { run::train(spec); });
    CHECK(why.find("TESSERA_ELASTIC_MEMBERS='six'") != std::string::npos);
  }
}
