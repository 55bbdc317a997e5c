// Internal to the collectives: one step of a plan timed without a flow simulation when every
// transfer provably runs at one constant rate (collective_steps.cpp).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/sim/collectives.hpp"

namespace tessera::sim::detail_collectives {

/// A group's routes with their latency and bottleneck bandwidth, looked up in the topology once
/// per (from, to) pair: plans repeat the same pairs over many steps (a pipelined tree over a
/// thousand ranks is a hundred thousand transfers between four thousand pairs).
class GroupRoutes {
 public:
  struct Route {
    const std::vector<int>* edges = nullptr;  ///< the topology's cached route
    Picos latency_ps = 0;
    double bw_bytes_per_s = 0;  ///< the smallest along the route (0 for an empty route)
  };
  /// Both must outlive this object.
  GroupRoutes(const Topology& t, const std::vector<int>& group);
  /// The route from group rank `from` to `to` (throws what Topology::route throws).
  Route get(int from, int to);
  /// Per directed edge of the topology, a slot for the steps' compact edge numbering: -1 except
  /// while a step runs (constant_rate_step resets what it sets), so a step costs what its
  /// transfers touch, not the size of the topology.
  std::vector<int>& edge_slot();

 private:
  const Topology& t_;
  const std::vector<int>& group_;
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

}  // namespace tessera::sim::detail_collectives
