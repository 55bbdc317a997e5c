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

/// Hosts that are interchangeable: the same nodes (kinds, devices) in the same order, the same
/// links among them and the same links, in the same order, to the same cluster switches. Swapping
/// two hosts of one class is an automorphism of the graph, so a route between two hosts is the
/// route between the class's representatives with every host-owned link renamed
/// (topology_symmetry.cpp).
struct HostSymmetry {
  bool valid = false;           ///< false: route every pair by its own Dijkstra
  std::vector<int> host_of;     ///< per node: index into `hosts`, -1 for a cluster node
  std::vector<int> local;       ///< per node: its position within its host
  std::vector<int> link_owner;  ///< per link: the owning host (-1: switch to switch)
  std::vector<int> link_local;  ///< per link: its position among the owner's links
  struct Host {
    int first_node = 0;  ///< nodes are first_node .. first_node + size − 1
    int cls = 0;
    std::vector<int> links;  ///< the links it owns, in id order
  };
  std::vector<Host> hosts;
  std::vector<std::vector<int>> reps;  ///< per class: its first one or two hosts
};

struct Topology::Impl {
  std::vector<Node> nodes;
  std::vector<Link> links;
  std::unordered_map<std::string, int> by_name;
  std::vector<std::vector<int>> out_edges;  ///< per vertex: directed edge ids leaving it

  // Routing cache: filled lazily under `mutex` by route(); dropped by any change to the graph.
  mutable std::mutex mutex;
  mutable std::vector<std::unique_ptr<SourceRoutes>> cache;
  mutable std::shared_ptr<RoutingGraph> graph;  ///< built on the first route, under `mutex`
  mutable std::unique_ptr<HostSymmetry> symmetry;  ///< built on the first route, under `mutex`
  /// Routes found through the symmetry, by src · nodes + dst (deque elements never move).
  mutable std::unordered_map<std::int64_t, int> symmetric_index;
  mutable std::deque<std::vector<int>> symmetric_routes;
  bool symmetric_routing = true;         ///< Topology::set_symmetric_routing
  const std::vector<int> empty_route{};  // {}: a const member needs an initializer (clang)

  void invalidate_routes() {
    cache.clear();
    graph.reset();
    symmetry.reset();
    symmetric_index.clear();
    symmetric_routes.clear();
  }
  /// The route from `src` to `dst` by the Dijkstra of `src` (cached per source); the caller holds
  /// `mutex`. Throws InvalidArgument when dst is unreachable.
  const std::vector<int>& dijkstra_route(int src, int dst, const std::string& topology_name) const;
  /// The route through the host symmetry, or nullptr when it does not apply to this pair (a
  /// cluster node at an end, or the representatives' route passes through a third host).
  const std::vector<int>* symmetric_route(int src, int dst, const std::string& topology_name) const;
  /// Dijkstra from `src` by (latency, hops) with the deterministic predecessor choice.
  std::unique_ptr<SourceRoutes> shortest_paths(int src) const;
};

}  // namespace tessera::sim
