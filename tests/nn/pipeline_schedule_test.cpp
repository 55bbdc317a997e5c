// Pipeline schedules and stage cuts (nn/pipeline.hpp): the actions each stage runs under 1F1B and
// GPipe (the 1F1B pattern of pp=4, M=6 written out by hand), the micro-batches in flight, the ideal
// bubble, and the balanced cut of units into stages against a brute force over every cut.
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/pipeline.hpp"

using namespace tessera;
using nn::PipelineSchedule;

namespace {

/// "F0 F1 B0 …": a stage's actions in the notation of the pipeline literature.
std::string spell(const std::vector<nn::PipelineAction>& actions) {
  std::ostringstream os;
  for (std::size_t k = 0; k < actions.size(); ++k)
    os << (k ? " " : "") << (actions[k].forward ? 'F' : 'B') << actions[k].micro;
  return os.str();
}

/// The invariants every schedule keeps: 2M actions, each micro-batch's forward once and its
/// backward once after it, backwards (and forwards) in increasing order.
void require_well_formed(const std::vector<nn::PipelineAction>& actions, int micro_batches) {
  INFO(spell(actions));
  REQUIRE(actions.size() == 2 * std::size_t(micro_batches));
  int next_forward = 0, next_backward = 0;
  for (const nn::PipelineAction& a : actions) {
    if (a.forward) {
      REQUIRE(a.micro == next_forward++);
    } else {
      REQUIRE(a.micro == next_backward++);
      REQUIRE(a.micro < next_forward);  // its forward ran before
    }
  }
  REQUIRE(next_forward == micro_batches);
  REQUIRE(next_backward == micro_batches);
}

/// The most expensive stage of the cut `starts` of `costs` (summed directly, not by prefixes).
double most_expensive(const std::vector<double>& costs, const std::vector<int>& starts) {
  std::vector<int> bounds{0};
  bounds.insert(bounds.end(), starts.begin(), starts.end());
  bounds.push_back(static_cast<int>(costs.size()));
  double most = 0;
  for (std::size_t k = 0; k + 1 < bounds.size(); ++k) {
    double sum = 0;
    for (int i = bounds[k]; i < bounds[k + 1]; ++i) sum += costs[i];
    most = std::max(most, sum);
  }
  return most;
}

/// The least most-expensive stage over every cut of `costs` into `stages` non-empty stages.
double brute_force_best(const std::vector<double>& costs, int stages) {
  const int n = static_cast<int>(costs.size());
  double best = INFINITY;
  std::vector<int> starts;
  std::function<void(int)> cut = [&](int from) {
    if (int(starts.size()) == stages - 1) {
      best = std::min(best, most_expensive(costs, starts));
      return;
    }
    const int left = stages - 1 - int(starts.size());  // starts still to place, after this one
    for (int s = from; s <= n - left; ++s) {
      starts.push_back(s);
      cut(s + 1);
      starts.pop_back();
    }
  };
  cut(1);
  return best;
}

}  // namespace

TEST_CASE("pipeline schedules: names parse back, other names are refused", "[nn][pipeline]") {
  for (const PipelineSchedule s : {PipelineSchedule::OneFOneB, PipelineSchedule::GPipe})
    REQUIRE(nn::parse_pipeline_schedule(nn::pipeline_schedule_name(s)) == s);
  REQUIRE(nn::pipeline_schedule_name(PipelineSchedule::OneFOneB) == "1f1b");
  REQUIRE(nn::pipeline_schedule_name(PipelineSchedule::GPipe) == "gpipe");
  REQUIRE_FALSE(nn::parse_pipeline_schedule("1F1B").has_value());
  REQUIRE_FALSE(nn::parse_pipeline_schedule("").has_value());
}

TEST_CASE("1F1B on pp=4 with 6 micro-batches runs the known pattern on each stage",
          "[nn][pipeline]") {
  // Stage k runs pp − 1 − k forwards ahead (warm-up), then alternates one forward and one backward,
  // then drains the remaining backwards.
  const char* expected[4] = {
      "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5",
      "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5",
      "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5",
      "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5",
  };
  for (int stage = 0; stage < 4; ++stage) {
    INFO("stage " << stage);
    REQUIRE(spell(nn::pipeline_actions(PipelineSchedule::OneFOneB, 4, stage, 6)) ==
            expected[stage]);
  }
}

TEST_CASE("GPipe runs every forward, then every backward, on each stage", "[nn][pipeline]") {
  for (int stage = 0; stage < 3; ++stage) {
    INFO("stage " << stage);
    REQUIRE(spell(nn::pipeline_actions(PipelineSchedule::GPipe, 3, stage, 4)) ==
            "F0 F1 F2 F3 B0 B1 B2 B3");
  }
}

TEST_CASE("one stage runs F0 B0 F1 B1 and so on under both schedules", "[nn][pipeline]") {
  for (const PipelineSchedule s : {PipelineSchedule::OneFOneB, PipelineSchedule::GPipe}) {
    INFO(nn::pipeline_schedule_name(s));
    REQUIRE(spell(nn::pipeline_actions(s, 1, 0, 3)) == "F0 B0 F1 B1 F2 B2");
    REQUIRE(nn::pipeline_in_flight(s, 1, 0, 3) == 1);
  }
}

TEST_CASE("every schedule is well formed and keeps the documented micro-batches in flight",
          "[nn][pipeline]") {
  for (const PipelineSchedule s : {PipelineSchedule::OneFOneB, PipelineSchedule::GPipe})
    for (int stages = 1; stages <= 6; ++stages)
      for (int stage = 0; stage < stages; ++stage)
        for (int m = 1; m <= 9; ++m) {
          INFO(nn::pipeline_schedule_name(s)
               << ", stage " << stage << " of " << stages << ", M = " << m);
          require_well_formed(nn::pipeline_actions(s, stages, stage, m), m);
          const int in_flight =
              s == PipelineSchedule::GPipe ? (stages == 1 ? 1 : m) : std::min(stages - stage, m);
          REQUIRE(nn::pipeline_in_flight(s, stages, stage, m) == in_flight);
        }
}

TEST_CASE("pipeline schedules refuse impossible stages and micro-batch counts", "[nn][pipeline]") {
  REQUIRE_THROWS_AS(nn::pipeline_actions(PipelineSchedule::OneFOneB, 2, 2, 3), InvalidArgument);
  REQUIRE_THROWS_AS(nn::pipeline_actions(PipelineSchedule::OneFOneB, 2, -1, 3), InvalidArgument);
  REQUIRE_THROWS_AS(nn::pipeline_actions(PipelineSchedule::GPipe, 0, 0, 3), InvalidArgument);
  REQUIRE_THROWS_AS(nn::pipeline_actions(PipelineSchedule::GPipe, 2, 0, 0), InvalidArgument);
  REQUIRE_THROWS_AS(nn::pipeline_ideal_bubble(0, 4), InvalidArgument);
  REQUIRE_THROWS_AS(nn::pipeline_ideal_bubble(2, 0), InvalidArgument);
}

TEST_CASE("the ideal bubble is (pp - 1) / (M + pp - 1)", "[nn][pipeline]") {
  REQUIRE(nn::pipeline_ideal_bubble(1, 1) == 0.0);
  REQUIRE(nn::pipeline_ideal_bubble(1, 8) == 0.0);
  REQUIRE(nn::pipeline_ideal_bubble(2, 1) == 0.5);
  REQUIRE(nn::pipeline_ideal_bubble(4, 6) == Approx(3.0 / 9.0).epsilon(1e-15));
  REQUIRE(nn::pipeline_ideal_bubble(4, 1) == Approx(0.75).epsilon(1e-15));
  // More micro-batches, smaller bubble.
  for (int m = 1; m < 32; ++m)
    REQUIRE(nn::pipeline_ideal_bubble(4, m + 1) < nn::pipeline_ideal_bubble(4, m));
}

TEST_CASE("balanced stage starts: hand cases and the earliest cut among ties", "[nn][pipeline]") {
  using V = std::vector<int>;
  REQUIRE(nn::balanced_stage_starts({1, 1, 1, 1}, 2) == V{2});
  REQUIRE(nn::balanced_stage_starts({1, 1, 1, 1}, 4) == V{1, 2, 3});
  REQUIRE(nn::balanced_stage_starts({5, 1, 1, 1, 1, 1}, 2) == V{1});     // 5 | 5
  REQUIRE(nn::balanced_stage_starts({1, 1, 1, 1, 1, 5}, 2) == V{5});     // 5 | 5
  REQUIRE(nn::balanced_stage_starts({4, 1, 1, 1, 1, 4}, 3) == V{1, 5});  // 4 | 4 | 4
  REQUIRE(nn::balanced_stage_starts({7, 3}, 1).empty());
  // Ties: {1} | {1, 1} and {1, 1} | {1} both cost 2; the earliest cut wins.
  REQUIRE(nn::balanced_stage_starts({1, 1, 1}, 2) == V{1});
  // One unit dominates: every cut costs 11; the earliest one wins.
  REQUIRE(nn::balanced_stage_starts({1, 10, 1}, 2) == V{1});
  // Free units (cost 0) still take a stage each.
  REQUIRE(nn::balanced_stage_starts({0, 0, 0}, 3) == V{1, 2});
}

TEST_CASE("balanced stage starts are optimal against a brute force on random costs",
          "[nn][pipeline]") {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<double> cost(0.0, 100.0);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + int(rng() % 11);
    const int stages = 1 + int(rng() % n);
    std::vector<double> costs(n);
    for (double& c : costs) c = trial % 5 == 0 ? double(rng() % 4) : cost(rng);  // some with ties
    const std::vector<int> starts = nn::balanced_stage_starts(costs, stages);
    INFO("trial " << trial << ": " << n << " units into " << stages << " stages");
    REQUIRE(starts.size() == std::size_t(stages - 1));
    REQUIRE_NOTHROW(nn::check_stage_starts(starts, n, stages));
    const double best = brute_force_best(costs, stages);
    REQUIRE(most_expensive(costs, starts) <= best * (1 + 1e-12) + 1e-12);
  }
}

TEST_CASE("balanced stage starts refuse fewer units than stages and bad costs", "[nn][pipeline]") {
  REQUIRE_THROWS_AS(nn::balanced_stage_starts({1, 2}, 3), InvalidArgument);
  REQUIRE_THROWS_AS(nn::balanced_stage_starts({}, 1), InvalidArgument);
  REQUIRE_THROWS_AS(nn::balanced_stage_starts({1, 2}, 0), InvalidArgument);
  REQUIRE_THROWS_AS(nn::balanced_stage_starts({1, -2, 3}, 2), InvalidArgument);
  REQUIRE_THROWS_AS(nn::balanced_stage_starts({1, NAN, 3}, 2), InvalidArgument);
  try {
    nn::balanced_stage_starts({1, 2}, 3);
    FAIL("2 units were cut into 3 stages");
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    INFO(what);
    REQUIRE(what.find("2 units") != std::string::npos);  // says how many units there are
    REQUIRE(what.find("pp=3") != std::string::npos);     // and what asked for more
  }
}

TEST_CASE("explicit stage starts are checked: count, order and range", "[nn][pipeline]") {
  REQUIRE_NOTHROW(nn::check_stage_starts({}, 5, 1));
  REQUIRE_NOTHROW(nn::check_stage_starts({1, 2, 4}, 5, 4));
  REQUIRE_NOTHROW(nn::check_stage_starts({4}, 5, 2));
  const std::vector<std::vector<int>> bad = {{}, {1, 3}, {0}, {5}, {-1}};
  for (const auto& starts : bad) {
    INFO(starts.size() << " starts");
    REQUIRE_THROWS_AS(nn::check_stage_starts(starts, 5, 2), InvalidArgument);
  }
  REQUIRE_THROWS_AS(nn::check_stage_starts({2, 2}, 5, 3),
                    InvalidArgument);  // not strictly increasing
  REQUIRE_THROWS_AS(nn::check_stage_starts({3, 2}, 5, 3), InvalidArgument);
  try {
    nn::check_stage_starts({3, 7}, 5, 3);
    FAIL("a start past the last unit was accepted");
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    INFO(what);
    REQUIRE(what.find("stage 2 starts at unit 7") != std::string::npos);
    REQUIRE(what.find("1..4") != std::string::npos);  // the range it must lie in
  }
}
