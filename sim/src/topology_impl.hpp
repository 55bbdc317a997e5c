// The private state of a Topology, shared by its source files (graph, JSON, presets, routing).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/sim/topology.hpp"

namespace tessera::sim {

/// Shortest-path results from one source, computed once; routes to each destination are built
/// from the predecessor edges on first use and kept (unordered_map values never move).
struct SourceRoutes {
  std::vector<int> pred_edge;  ///< directed edge into each vertex on its route (-1: none)
  std::unordered_map<int, std::vector<int>> routes;
};

struct Topology::Impl {
  std::vector<Node> nodes;
  std::vector<Link> links;
  std::unordered_map<std::string, int> by_name;
  std::vector<std::vector<int>> out_edges;  ///< per vertex: directed edge ids leaving it

  // Routing cache: filled lazily under `mutex` by route(); dropped by any change to the graph.
  mutable std::mutex mutex;
  mutable std::vector<std::unique_ptr<SourceRoutes>> cache;
  const std::vector<int> empty_route;

  void invalidate_routes() { cache.clear(); }
  /// Dijkstra from `src` by (latency, hops) with the deterministic predecessor choice.
  std::unique_ptr<SourceRoutes> shortest_paths(int src) const;
};

}  // namespace tessera::sim
