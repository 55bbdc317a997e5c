// The private state of a Topology, shared by its source files (graph, JSON, presets, routing).
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/sim/topology.hpp"

namespace tessera::sim {

/// Shortest-path results from one source, computed once; routes to each destination are built
/// from the predecessor edges on first use and kept (deque elements never move).
struct SourceRoutes {
  std::vector<int> pred_edge;  ///< directed edge into each vertex on its route (-1: none)
  std::vector<int> built;      ///< per destination vertex: index into `routes`, -1 until built
  std::deque<std::vector<int>> routes;
};

/// The Boost graph Dijkstra runs on (defined in topology_routes.cpp), built once per topology.
struct RoutingGraph;

struct Topology::Impl {
  std::vector<Node> nodes;
  std::vector<Link> links;
  std::unordered_map<std::string, int> by_name;
  std::vector<std::vector<int>> out_edges;  ///< per vertex: directed edge ids leaving it

  // Routing cache: filled lazily under `mutex` by route(); dropped by any change to the graph.
  mutable std::mutex mutex;
  mutable std::vector<std::unique_ptr<SourceRoutes>> cache;
  mutable std::shared_ptr<RoutingGraph> graph;  ///< built on the first route, under `mutex`
  const std::vector<int> empty_route{};  // {}: a const member needs an initializer (clang)

  void invalidate_routes() {
    cache.clear();
    graph.reset();
  }
  /// Dijkstra from `src` by (latency, hops) with the deterministic predecessor choice.
  std::unique_ptr<SourceRoutes> shortest_paths(int src) const;
};

}  // namespace tessera::sim
