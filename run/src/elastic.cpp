// Elastic jobs: a round's environment (written by the launcher, read by a rank), the launcher's
// round record, and the elastic series in Prometheus text.
#include "tessera/run/elastic.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "prometheus_text.hpp"
#include "tessera/core/error.hpp"

namespace tessera::run {

namespace {

constexpr const char* kRound = "TESSERA_ELASTIC_ROUND";
constexpr const char* kRestarts = "TESSERA_ELASTIC_RESTARTS";
constexpr const char* kMaxRestarts = "TESSERA_ELASTIC_MAX_RESTARTS";
constexpr const char* kMembers = "TESSERA_ELASTIC_MEMBERS";
constexpr const char* kTimeLost = "TESSERA_ELASTIC_TIME_LOST_S";
constexpr const char* kStepsLost = "TESSERA_ELASTIC_STEPS_LOST";

using Getenv = std::function<const char*(const char*)>;

// The whole of `text` as a T (no sign, space or suffix left over), or nothing.
template <class T>
std::optional<T> parse_whole(const std::string& text) {
  T v{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

// A variable the launcher sets with every round: absent when TESSERA_ELASTIC_ROUND is set means
// the rank was not started by `tessera launch`, or its environment was edited.
std::string required(const Getenv& getenv, const char* name) {
  const char* v = getenv(name);
  TESSERA_CHECK(v != nullptr, "elastic: ", name, " is not set but ", kRound,
                " is: tessera launch sets every TESSERA_ELASTIC_* variable of a round; start the "
                "rank with it, or unset ",
                kRound, " to run outside an elastic job");
  return v;
}

template <class T>
T integer_var(const Getenv& getenv, const char* name, T min) {
  const std::string text = required(getenv, name);
  const std::optional<T> v = parse_whole<T>(text);
  TESSERA_CHECK(v && *v >= min, "elastic: ", name, "='", text, "' is not an integer >= ", min,
                "; tessera launch writes it, so the rank's environment was changed: unset the "
                "TESSERA_ELASTIC_* variables or give a whole number");
  return *v;
}

double seconds_var(const Getenv& getenv, const char* name) {
  const std::string text = required(getenv, name);
  const std::optional<double> v = parse_whole<double>(text);
  TESSERA_CHECK(v && std::isfinite(*v) && *v >= 0, "elastic: ", name, "='", text,
                "' is not a number of seconds >= 0; tessera launch writes it, so the rank's "
                "environment was changed: unset the TESSERA_ELASTIC_* variables or give seconds "
                "such as 12.5");
  return *v;
}

// The shortest text that reads back as the same double.
std::string shortest(double v) {
  char buf[64];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
  TESSERA_ASSERT(ec == std::errc(), "elastic: a double did not fit 64 characters");
  return std::string(buf, ptr);
}

}  // namespace

std::optional<ElasticRound> elastic_round_from_env(const Getenv& getenv) {
  const Getenv get = getenv ? getenv : [](const char* name) { return std::getenv(name); };
  if (get(kRound) == nullptr) return std::nullopt;
  ElasticRound r;
  r.round = integer_var<int>(get, kRound, 0);
  r.restarts = integer_var<int>(get, kRestarts, 0);
  r.max_restarts = integer_var<int>(get, kMaxRestarts, 0);
  r.members = integer_var<int>(get, kMembers, 1);
  r.time_lost_s = seconds_var(get, kTimeLost);
  r.steps_lost = integer_var<std::int64_t>(get, kStepsLost, 0);
  return r;
}

std::vector<std::string> elastic_env(const ElasticRound& r) {
  auto var = [](const char* name, const std::string& value) {
    return std::string(name) + "=" + value;
  };
  return {var(kRound, std::to_string(r.round)),
          var(kRestarts, std::to_string(r.restarts)),
          var(kMaxRestarts, std::to_string(r.max_restarts)),
          var(kMembers, std::to_string(r.members)),
          var(kTimeLost, shortest(r.time_lost_s)),
          var(kStepsLost, std::to_string(r.steps_lost))};
}

std::string elastic_round_prometheus_text(const ElasticRound& r) {
  PrometheusText t;
  t.family("tessera_elastic_round", "gauge",
           "The elastic job's current round, 0 for the first: each membership change starts the "
           "next.");
  t.sample("tessera_elastic_round", r.round);
  t.family("tessera_elastic_restarts_total", "counter",
           "Restarts the elastic job has used: one per membership change.");
  t.sample("tessera_elastic_restarts_total", r.restarts);
  t.family("tessera_elastic_members", "gauge",
           "Members of the current round as tessera launch counts them (ranks with --nproc "
           "MIN:MAX, launchers with --nnodes MIN:MAX).");
  t.sample("tessera_elastic_members", r.members);
  t.family("tessera_elastic_time_lost_seconds_total", "counter",
           "Seconds lost to membership changes: from each ended round's last completed step "
           "until the next round was back at that step. Only known losses count: a round not yet "
           "back there (or never) adds nothing.");
  t.sample("tessera_elastic_time_lost_seconds_total", r.time_lost_s);
  t.family("tessera_elastic_steps_lost_total", "counter",
           "Steps redone after membership changes: each ended round's last step minus the step "
           "the next round resumed from.");
  t.sample("tessera_elastic_steps_lost_total", r.steps_lost);
  return t.str();
}

std::string round_json(const RoundRecord& r) {
  // Unknown times (negative) are null rather than a number a reader could take for a time.
  auto time_or_null = [](double s) {
    return s < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
  };
  nlohmann::ordered_json j;
  j["round"] = r.round;
  j["world"] = r.world;
  j["members"] = r.members;
  j["started_s"] = r.started_s;
  j["first_step_s"] = time_or_null(r.first_step_s);
  j["resumed_step"] = r.resumed_step;
  j["last_step"] = r.last_step;
  j["last_step_s"] = time_or_null(r.last_step_s);
  j["ended"] = r.ended;
  j["ended_s"] = r.ended_s;
  j["restart_s"] = time_or_null(r.restart_s);
  j["time_lost_s"] = time_or_null(r.time_lost_s);
  j["steps_lost"] = r.steps_lost;
  return j.dump();
}

std::string elastic_prometheus_text(const std::vector<RoundRecord>& rounds, int restarts,
                                    int max_restarts) {
  TESSERA_CHECK(restarts >= 0 && max_restarts >= 0, "elastic: restarts ", restarts,
                " and max_restarts ", max_restarts, " must be >= 0");
  ElasticRound job;
  job.restarts = restarts;
  job.max_restarts = max_restarts;
  const RoundRecord* last_restart = nullptr;
  for (const RoundRecord& r : rounds) {
    job.steps_lost += r.steps_lost;
    if (r.time_lost_s >= 0) job.time_lost_s += r.time_lost_s;
    if (r.restart_s >= 0) last_restart = &r;
  }
  const RoundRecord last = rounds.empty() ? RoundRecord{} : rounds.back();
  job.round = last.round;
  job.members = last.members;
  PrometheusText t;
  t.family("tessera_elastic_max_restarts", "gauge", "The job's --max-restarts.");
  t.sample("tessera_elastic_max_restarts", max_restarts);
  t.family("tessera_elastic_world_size", "gauge", "Ranks in the current round.");
  t.sample("tessera_elastic_world_size", last.world);
  t.family("tessera_elastic_last_step", "gauge",
           "The last step the current round completed (its round record's last_step).");
  t.sample("tessera_elastic_last_step", last.last_step);
  if (last_restart) {
    t.family("tessera_elastic_last_restart_seconds", "gauge",
             "The latest restart: from the event that ended a round to the next round's first "
             "step.");
    t.sample("tessera_elastic_last_restart_seconds", last_restart->restart_s);
  }
  return elastic_round_prometheus_text(job) + t.str();
}

}  // namespace tessera::run
