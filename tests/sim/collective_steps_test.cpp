// Collective steps without a flow simulation: simulate_plan (which times uniform steps in closed
// form) against a reference that runs every step through a FlowNetwork, plan_lower_bound never
// above the simulated time, and Auto (which skips algorithms by their bound) choosing exactly
// what simulating every candidate chooses — over presets, groups, ops and sizes.
#include <cstdio>

#include "collective_steps.hpp"
#include "sim_test_util.hpp"
#include "tessera/sim/collectives.hpp"

using namespace tessera;
using namespace tessera::sim;

namespace {

/// The obvious version: each step on a fresh network, its time counted `repeat` times.
CollectiveResult reference(const Topology& t, const CollectivePlan& plan,
                           const std::vector<int>& group) {
  CollectiveResult r;
  r.edge_bytes.assign(t.num_edges(), 0.0);
  for (const CollectiveStep& step : plan.steps) {
    FlowNetwork net(t);
    for (const Transfer& tr : step.transfers) net.start(group[tr.from], group[tr.to], tr.bytes);
    r.time_ps += net.run_to_completion() * step.repeat;
    for (int e = 0; e < t.num_edges(); ++e) r.edge_bytes[e] += net.edge_bytes()[e] * step.repeat;
  }
  return r;
}

std::vector<int> pick(const std::vector<int>& devices, const std::string& which) {
  std::vector<int> g;
  for (std::size_t i = 0; i < devices.size(); ++i)
    if (which == "all" || (which == "half" && i < devices.size() / 2) ||
        (which == "odd" && i % 2 == 1) || (which == "uneven" && (i % 8 < 3 || i < 8)))
      g.push_back(devices[i]);
  return g;
}

}  // namespace

TEST_CASE("closed-form steps, lower bounds and Auto agree with the flow network",
          "[sim][collectives]") {
  int plans = 0, tight = 0;
  for (const char* preset : {"dgx-a100:4", "dgx-h100:3:fat-tree", "rtx4090x4", "hgx-h200"}) {
    const Topology t = Topology::preset(preset);
    for (const char* which : {"all", "half", "odd", "uneven"}) {
      const std::vector<int> group = pick(t.devices(), which);
      if (group.size() < 2) continue;
      for (CollectiveOp op :
           {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter,
            CollectiveOp::Broadcast, CollectiveOp::AllToAll}) {
        for (std::int64_t bytes :
             {std::int64_t{1}, std::int64_t{4099}, std::int64_t{1} << 20, std::int64_t{37} << 20}) {
          INFO(preset << ", " << which << " (" << group.size() << " ranks), "
                      << collective_op_name(op) << ", " << bytes << " bytes");
          CollectiveResult best;
          int best_i = -1;
          const std::vector<Algorithm> candidates = candidate_algorithms(t, op, group);
          for (std::size_t i = 0; i < candidates.size(); ++i) {
            INFO(algorithm_name(candidates[i]));
            const CollectivePlan plan = plan_collective(t, op, candidates[i], group, bytes);
            const CollectiveResult fast = simulate_plan(t, plan, group);
            const CollectiveResult ref = reference(t, plan, group);
            REQUIRE(fast.time_ps == ref.time_ps);
            REQUIRE(fast.edge_bytes == ref.edge_bytes);
            const Picos bound = plan_lower_bound(t, plan, group);
            REQUIRE(bound <= fast.time_ps);
            tight += bound >= fast.time_ps - fast.time_ps / 100000;
            ++plans;
            if (best_i < 0 || fast.time_ps < best.time_ps)
              best = fast, best_i = static_cast<int>(i);
          }
          const CollectiveResult a = simulate_collective(t, op, Algorithm::Auto, group, bytes);
          REQUIRE(a.time_ps == best.time_ps);
          REQUIRE(a.algorithm == candidates[best_i]);
          REQUIRE(a.edge_bytes == best.edge_bytes);
        }
      }
    }
  }
  std::printf("collective steps: %d plans checked, lower bound within 1e-5 of the time for %d\n",
              plans, tight);
  REQUIRE(tight > 0);
}

TEST_CASE("step templates filled on several threads equal those filled on one", "[sim]") {
  // A pipelined double binary tree over 256 GPUs: dozens of steps of hundreds of transfers.
  const Topology t = Topology::preset("dgx-a100:32");
  const CollectivePlan plan =
      plan_collective(t, CollectiveOp::AllReduce, Algorithm::Tree, t.devices(), 64 << 20);
  detail_collectives::GroupRoutes one(t, t.devices()), two(t, t.devices());
  one.fill_templates(plan.steps, 1);
  two.fill_templates(plan.steps, 2);
  int filled = 0;
  for (const CollectiveStep& step : plan.steps) {
    const detail_collectives::StepTemplate* a = one.step_template(step);
    const detail_collectives::StepTemplate* b = two.step_template(step);
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    REQUIRE(a->filled);
    REQUIRE(b->filled);
    REQUIRE(a->constant_rate == b->constant_rate);
    REQUIRE(a->latency_rate == b->latency_rate);
    REQUIRE(a->edge_transfers == b->edge_transfers);
    filled += a->constant_rate;
  }
  REQUIRE(filled > 10);
  // And the collective timed through them is the one timed step by step.
  const CollectiveResult threaded = detail_collectives::simulate_plan(t, plan, two);
  detail_collectives::GroupRoutes fresh(t, t.devices());
  CollectiveResult serial;
  serial.edge_bytes.assign(t.num_edges(), 0.0);
  for (const CollectiveStep& step : plan.steps) {
    Picos step_ps = 0;
    REQUIRE(detail_collectives::constant_rate_step(t, step, fresh, step_ps, serial.edge_bytes));
    serial.time_ps += step_ps * step.repeat;
  }
  REQUIRE(threaded.time_ps == serial.time_ps);
  REQUIRE(threaded.edge_bytes == serial.edge_bytes);
}
