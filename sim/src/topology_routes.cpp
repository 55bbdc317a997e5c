// Routing: Dijkstra (Boost.Graph) by (latency, hops) from each source once, cached; compute nodes
// are endpoints only; ties between equal paths broken by vertex id so routes never depend on heap
// order.
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/property_map/function_property_map.hpp>
#include <algorithm>
#include <limits>
#include <utility>

#include "tessera/core/error.hpp"
#include "topology_impl.hpp"

namespace tessera::sim {

namespace {

/// Path cost compared lexicographically: total latency first, then the number of hops.
using Cost = std::pair<Picos, int>;
constexpr Cost kInfinite{std::numeric_limits<Picos>::max(), std::numeric_limits<int>::max()};

struct EdgeProps {
  int id;  ///< directed edge id (2·link + direction)
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property,
                                    EdgeProps>;
using GraphEdge = boost::graph_traits<Graph>::edge_descriptor;

/// Keeps an edge unless it leaves a compute node other than the source (no relaying via GPUs).
struct NoComputeTransit {
  const Graph* g = nullptr;
  const std::vector<Node>* nodes = nullptr;
  int src = -1;
  bool operator()(const GraphEdge& e) const {
    const int from = static_cast<int>(boost::source(e, *g));
    return from == src || !is_compute((*nodes)[from].kind);
  }
};

}  // namespace

std::unique_ptr<SourceRoutes> Topology::Impl::shortest_paths(int src) const {
  const int n = static_cast<int>(nodes.size());
  Graph g(n);
  for (int v = 0; v < n; ++v)
    for (int e : out_edges[v]) {
      const Link& l = links[e / 2];
      boost::add_edge(v, e % 2 == 0 ? l.b : l.a, EdgeProps{e}, g);
    }
  boost::filtered_graph<Graph, NoComputeTransit> fg(g, NoComputeTransit{&g, &nodes, src});

  std::vector<Cost> dist(n, kInfinite);
  auto weight = boost::make_function_property_map<GraphEdge, Cost>(
      [&](const GraphEdge& e) { return Cost{links[g[e].id / 2].latency_ps, 1}; });
  auto combine = [](const Cost& a, const Cost& b) {
    if (a == kInfinite || b == kInfinite) return kInfinite;
    return Cost{a.first + b.first, a.second + b.second};
  };
  boost::dijkstra_shortest_paths(
      fg, static_cast<std::size_t>(src),
      boost::weight_map(weight)
          .distance_map(boost::make_iterator_property_map(dist.begin(),
                                                          boost::get(boost::vertex_index, g)))
          .distance_compare(std::less<Cost>())
          .distance_combine(combine)
          .distance_inf(kInfinite)
          .distance_zero(Cost{0, 0}));

  // Deterministic predecessor: among the in-edges u→v that lie on a shortest path (u may relay),
  // the one from the smallest u (then the smallest edge id). Links are symmetric, so the in-edges
  // of v are the reverses (id ^ 1) of its out-edges.
  auto routes = std::make_unique<SourceRoutes>();
  routes->pred_edge.assign(n, -1);
  for (int v = 0; v < n; ++v) {
    if (v == src || dist[v] == kInfinite) continue;
    int best_from = -1, best_edge = -1;
    for (int out : out_edges[v]) {
      const int in = out ^ 1;
      const Link& l = links[in / 2];
      const int u = in % 2 == 0 ? l.a : l.b;
      if (dist[u] == kInfinite || (u != src && is_compute(nodes[u].kind))) continue;
      if (combine(dist[u], Cost{l.latency_ps, 1}) != dist[v]) continue;
      if (best_from < 0 || u < best_from || (u == best_from && in < best_edge)) {
        best_from = u;
        best_edge = in;
      }
    }
    routes->pred_edge[v] = best_edge;
  }
  return routes;
}

const std::vector<int>& Topology::route(int src, int dst) const {
  const int n = static_cast<int>(impl_->nodes.size());
  TESSERA_CHECK(src >= 0 && src < n && dst >= 0 && dst < n, "sim: topology '", name,
                "': route from node ", src, " to node ", dst, " asked, but there are ", n,
                " nodes (ids 0..", n - 1, ")");
  if (src == dst) return impl_->empty_route;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->cache.size() != static_cast<std::size_t>(n)) impl_->cache.resize(n);
  auto& source = impl_->cache[src];
  if (!source) source = impl_->shortest_paths(src);
  auto it = source->routes.find(dst);
  if (it != source->routes.end()) return it->second;

  std::vector<int> path;
  for (int v = dst; v != src;) {
    const int e = source->pred_edge[v];
    if (e < 0) {
      throw InvalidArgument(detail::cat(
          "sim: topology '", name, "': no route from \"", impl_->nodes[src].name, "\" to \"",
          impl_->nodes[dst].name,
          "\" (routes never pass through a gpu or cpu); add a link or a switch joining them"));
    }
    path.push_back(e);
    const Link& l = impl_->links[e / 2];
    v = e % 2 == 0 ? l.a : l.b;
  }
  std::reverse(path.begin(), path.end());
  return source->routes.emplace(dst, std::move(path)).first->second;
}

}  // namespace tessera::sim
