// Collectives: names, the nccl-tests bandwidth factors, and simulation of a plan on an idle
// FlowNetwork (each step once, times its repeat count; constant-rate steps in closed form), with Auto
// choosing the fastest.
#include "tessera/sim/collectives.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "collective_steps.hpp"
#include "tessera/core/error.hpp"

namespace tessera::sim {

namespace {
constexpr const char* kOpNames[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                    "all_to_all"};
constexpr const char* kAlgoNames[] = {"auto", "ring", "tree", "hier", "pairwise", "direct"};
}  // namespace

std::string collective_op_name(CollectiveOp op) { return kOpNames[static_cast<int>(op)]; }
std::string algorithm_name(Algorithm a) { return kAlgoNames[static_cast<int>(a)]; }

CollectiveOp parse_collective_op(const std::string& s) {
  for (int i = 0; i < 5; ++i)
    if (s == kOpNames[i]) return static_cast<CollectiveOp>(i);
  throw InvalidArgument(detail::cat("sim: unknown collective \"", s, "\"; use all_reduce, "
                                    "all_gather, reduce_scatter, broadcast or all_to_all"));
}

Algorithm parse_algorithm(const std::string& s) {
  if (s == "hierarchical") return Algorithm::Hierarchical;
  for (int i = 0; i < 6; ++i)
    if (s == kAlgoNames[i]) return static_cast<Algorithm>(i);
  throw InvalidArgument(detail::cat("sim: unknown collective algorithm \"", s,
                                    "\"; use auto, ring, tree, hier, pairwise or direct"));
}

double busbw_factor(CollectiveOp op, int p) {
  TESSERA_CHECK(p >= 1, "sim: busbw_factor needs p ≥ 1 ranks, got ", p);
  switch (op) {
    case CollectiveOp::AllReduce: return 2.0 * (p - 1) / p;
    case CollectiveOp::Broadcast: return 1.0;
    default: return static_cast<double>(p - 1) / p;
  }
}

namespace detail_collectives {

CollectiveResult simulate_plan(const Topology& t, const CollectivePlan& plan, GroupRoutes& routes) {
  const std::vector<int>& group = routes.group();
  CollectiveResult res;
  res.algorithm = plan.algorithm;
  res.edge_bytes.assign(t.num_edges(), 0.0);
  std::optional<FlowNetwork> net;  // built for the first step that needs a flow simulation
  for (const CollectiveStep& step : plan.steps) {
    TESSERA_CHECK(step.repeat >= 1, "sim: a collective step repeats ", step.repeat,
                  " times; give a count ≥ 1");
    for (const Transfer& tr : step.transfers)
      TESSERA_CHECK(tr.from >= 0 && tr.from < static_cast<int>(group.size()) && tr.to >= 0 &&
                        tr.to < static_cast<int>(group.size()),
                    "sim: transfer ", tr.from, " → ", tr.to, " names a rank outside the ",
                    group.size(), "-rank group");
  }
  routes.fill_templates(plan.steps);
  for (const CollectiveStep& step : plan.steps) {
    if (step.transfers.empty()) continue;
    // Equal sizes: the step's template, routed and filled once for every size and algorithm.
    const StepTemplate* tpl = routes.step_template(step, true);
    if (tpl && tpl->constant_rate) {
      const double bytes = static_cast<double>(step.transfers[0].bytes) * step.repeat;
      res.time_ps += tpl->time_ps(step.transfers[0].bytes) * step.repeat;
      for (const auto& [e, n] : tpl->edge_transfers) res.edge_bytes[e] += n * bytes;
      continue;
    }
    Picos step_ps = 0;
    if (constant_rate_step(t, step, routes, step_ps, res.edge_bytes)) {
      res.time_ps += step_ps * step.repeat;
      continue;
    }
    if (!net) net.emplace(t);
    const Picos begin = net->now();
    const std::vector<double> carried = net->edge_bytes();  // before the step
    for (const Transfer& tr : step.transfers) net->start(group[tr.from], group[tr.to], tr.bytes);
    res.time_ps += (net->run_to_completion() - begin) * step.repeat;
    // The step's bytes per edge, from the network (each completed flow adds its bytes to every
    // edge of its route: whole numbers, so the difference is exact).
    for (std::size_t e = 0; e < carried.size(); ++e)
      res.edge_bytes[e] += (net->edge_bytes()[e] - carried[e]) * step.repeat;
  }
  if (res.time_ps > 0) {
    const double seconds = static_cast<double>(res.time_ps) / kPicosPerSecond;
    res.algbw_GBps = static_cast<double>(plan.bytes) / seconds / 1e9;
    res.busbw_GBps = res.algbw_GBps * busbw_factor(plan.op, static_cast<int>(group.size()));
  }
  return res;
}

CollectiveResult simulate_collective(const Topology& t, CollectiveOp op, Algorithm algo,
                                     std::int64_t bytes, GroupRoutes& routes) {
  const std::vector<int>& group = routes.group();
  if (algo != Algorithm::Auto)
    return simulate_plan(t, plan_collective(t, op, algo, group, bytes), routes);
  // Simulate the candidates in order of a lower bound and skip those whose bound exceeds the best
  // time found: the same choice as simulating them all (ties: the earlier candidate). The first
  // bound is one step's (the one that weighs most, a pipeline's steady state): a plan whose
  // single step already takes longer than the best is skipped without routing its other steps
  // (a pipelined tree over thousands of ranks is dozens of steps of thousands of transfers).
  const std::vector<Algorithm> candidates = candidate_algorithms(t, op, group);
  std::vector<CollectivePlan> plans;
  std::vector<std::pair<Picos, int>> order;  // (one step's bound, candidate index)
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    plans.push_back(plan_collective(t, op, candidates[i], group, bytes));
    order.emplace_back(heaviest_step_bound(plans.back(), routes), static_cast<int>(i));
  }
  std::sort(order.begin(), order.end());
  CollectiveResult best;
  int best_index = -1;
  const auto skip = [&](Picos bound, int i) {
    return best_index >= 0 && (bound > best.time_ps || (bound == best.time_ps && i > best_index));
  };
  for (const auto& [step_bound, i] : order) {
    if (skip(step_bound, i) || skip(lower_bound(t, plans[i], routes), i)) continue;
    CollectiveResult r = simulate_plan(t, plans[i], routes);
    if (best_index < 0 || r.time_ps < best.time_ps || (r.time_ps == best.time_ps && i < best_index)) {
      best = std::move(r);
      best_index = i;
    }
  }
  return best;
}

}  // namespace detail_collectives

CollectiveResult simulate_plan(const Topology& t, const CollectivePlan& plan,
                               const std::vector<int>& group) {
  detail_collectives::GroupRoutes routes(t, group);
  return detail_collectives::simulate_plan(t, plan, routes);
}

CollectiveResult simulate_collective(const Topology& t, CollectiveOp op, Algorithm algo,
                                     const std::vector<int>& group, std::int64_t bytes) {
  detail_collectives::GroupRoutes routes(t, group);
  return detail_collectives::simulate_collective(t, op, algo, bytes, routes);
}

}  // namespace tessera::sim
