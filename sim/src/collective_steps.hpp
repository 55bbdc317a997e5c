// Internal to the collectives: one step of a plan timed without a flow simulation when every
// transfer provably runs at one constant rate (collective_steps.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/sim/collectives.hpp"

namespace tessera::sim::detail_collectives {

/// What a step of equal-sized transfers costs, whatever their size: the max-min rates do not
/// depend on it. A collective of another size, or another algorithm with the same step (a ring's
/// step in every gradient bucket), reuses it instead of routing and filling the step again.
struct StepTemplate {
  /// True when every transfer keeps one max-min rate to its end for every size
  /// (constant_rate_step's conditions, with each transfer on a bottleneck no faster than the ones
  /// it limits): the time and the bytes per edge follow from the fields below. False: the step
  /// needs a flow simulation.
  bool constant_rate = false;
  bool filled = false;  ///< the fields above are known (filled on the first simulation)
  std::vector<std::pair<Picos, double>> latency_rate;  ///< distinct (route latency, rate)
  std::vector<std::pair<int, int>> edge_transfers;     ///< per edge crossed: how many transfers
  /// For the lower bound: distinct (route latency, route bandwidth) of the transfers, and distinct
  /// (smallest route latency on the edge, transfers crossing it, its bandwidth) of the edges.
  std::vector<std::pair<Picos, double>> latency_bw;
  std::vector<std::tuple<Picos, double, double>> edge_load;
  /// The step's time for transfers of `bytes` each (constant_rate only).
  Picos time_ps(std::int64_t bytes) const;
  /// plan_lower_bound's term for the step, before the repeat count.
  double bound_ps(std::int64_t bytes) const;
};

/// A group's routes with their latency and bottleneck bandwidth, looked up in the topology once
/// per (from, to) pair: plans repeat the same pairs over many steps (a pipelined tree over a
/// thousand ranks is a hundred thousand transfers between four thousand pairs). It also keeps the
/// StepTemplate of every step of equal-sized transfers it has seen, by the step's (from, to) list.
class GroupRoutes {
 public:
  struct Route {
    const std::vector<int>* edges = nullptr;  ///< the topology's cached route
    Picos latency_ps = 0;
    double bw_bytes_per_s = 0;  ///< the smallest along the route (0 for an empty route)
  };
  /// The topology must outlive this object.
  GroupRoutes(const Topology& t, std::vector<int> group);
  const std::vector<int>& group() const noexcept { return group_; }
  /// The route from group rank `from` to `to` (throws what Topology::route throws).
  Route get(int from, int to);
  /// The route get() has looked up before, without changing anything (safe from several threads
  /// while nothing calls get()); throws InternalError for a pair not looked up.
  Route find(int from, int to) const;
  /// Per directed edge of the topology, a slot for the steps' compact edge numbering: -1 except
  /// while a step runs (constant_rate_step resets what it sets), so a step costs what its
  /// transfers touch, not the size of the topology.
  std::vector<int>& edge_slot();
  /// The step's template, or nullptr when its transfers differ in size or one is empty (the
  /// caller then times it transfer by transfer). Built on first sight of the step's (from, to)
  /// list, kept for the life of this object.
  /// With `rates`, its constant_rate, latency_rate and edge_transfers are filled in too (a lower
  /// bound needs only the rest: an algorithm Auto skips is never filled).
  const StepTemplate* step_template(const CollectiveStep& step, bool rates = false);
  /// step_template(step, true) for every step of equal-sized transfers, the fillings spread over
  /// the machine's cores when there are enough of them to pay for the threads (a pipelined tree
  /// over ten thousand ranks: dozens of steps of tens of thousands of transfers). The same
  /// templates as filling them one by one. `threads` > 0 sets the thread count (tests), whatever
  /// the size.
  void fill_templates(const std::vector<CollectiveStep>& steps, unsigned threads = 0);

 private:
  using Shape = std::vector<std::pair<int, int>>;
  /// The step's template, made (not filled) on first sight; nullptr as step_template says.
  StepTemplate* template_of(const CollectiveStep& step);
  StepTemplate make_template(const CollectiveStep& step);
  void fill_template(const CollectiveStep& step, StepTemplate& tpl);
  const Topology& t_;
  std::vector<int> group_;
  std::unordered_map<std::uint64_t, std::vector<std::pair<Shape, std::unique_ptr<StepTemplate>>>>
      templates_;
  std::vector<std::vector<std::pair<int, Route>>> by_from_;  ///< a short list per sender
  std::unordered_map<std::int64_t, Route> more_;             ///< senders with many peers
  std::vector<int> edge_slot_;                               ///< see edge_slot()
};

/// Times `step` without a flow simulation when that is exact. Its transfers are given their max-min
/// fair rates with all of them moving (progressive filling, as FlowNetwork computes them). When
/// the transfers on each edge all have the same route latency (so they start moving together),
/// none moves zero bytes, and every transfer on each transfer's bottleneck edge lasts at least as
/// long as it does, that edge stays saturated and every transfer keeps its rate to the end: the
/// step takes max(latency + transfer_time_ps(bytes, rate)), exactly what the FlowNetwork gives, at
/// a fraction of the cost. Returns false (and changes nothing) otherwise. On success sets
/// `time_ps` and adds each transfer's bytes × step.repeat to `edge_bytes` along its route.
bool constant_rate_step(const Topology& t, const CollectiveStep& step, GroupRoutes& routes,
                        Picos& time_ps, std::vector<double>& edge_bytes);

/// plan_lower_bound with the routes looked up through `routes`.
Picos lower_bound(const Topology& t, const CollectivePlan& plan, GroupRoutes& routes);

/// A lower bound on the plan's time from its heaviest step alone (most transfers × repeat), its
/// template built, the others not: at most lower_bound(plan).
Picos heaviest_step_bound(const CollectivePlan& plan, GroupRoutes& routes);

/// simulate_plan on the group of `routes`, its routes and step templates kept there.
CollectiveResult simulate_plan(const Topology& t, const CollectivePlan& plan, GroupRoutes& routes);
/// simulate_collective on the group of `routes` (the engine keeps one per group it times).
CollectiveResult simulate_collective(const Topology& t, CollectiveOp op, Algorithm algo,
                                     std::int64_t bytes, GroupRoutes& routes);

}  // namespace tessera::sim::detail_collectives
