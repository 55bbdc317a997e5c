// Routing: Dijkstra over the topology's Boost.Graph (compressed sparse rows) by (latency, hops)
// from each source once, cached; compute nodes are endpoints only; ties between equal paths broken
// by vertex id so routes never depend on heap order.
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/range/iterator_range.hpp>
#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "tessera/core/error.hpp"
#include "topology_impl.hpp"

namespace tessera::sim {

namespace {

/// Path cost compared lexicographically: total latency first, then the number of hops.
using Cost = std::pair<Picos, int>;
constexpr Cost kInfinite{std::numeric_limits<Picos>::max(), std::numeric_limits<int>::max()};

struct EdgeProps {
  int id;             ///< directed edge id (2·link + direction)
  Picos latency_ps;   ///< the link's (kept here: Dijkstra reads it per relaxation)
};
/// Compressed sparse rows: out-edges and their properties lie in contiguous arrays.
using Graph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, EdgeProps>;
using GraphEdge = boost::graph_traits<Graph>::edge_descriptor;

}  // namespace

/// The graph with what routing reads per edge stored compactly (node and link records are large).
struct RoutingGraph {
  Graph g;
  std::vector<char> compute;  ///< per vertex
  struct In {
    int from, edge;
    Picos latency_ps;
  };
  std::vector<std::vector<In>> in;  ///< per vertex: its in-edges (reverses of its out-edges)
};

std::unique_ptr<SourceRoutes> Topology::Impl::shortest_paths(int src) const {
  const int n = static_cast<int>(nodes.size());
  if (!graph) {  // built once (the caller holds `mutex`): rebuilding it per source dominated
    graph = std::make_shared<RoutingGraph>();  // routing on thousand-GPU clusters
    std::vector<std::pair<std::size_t, std::size_t>> ends;
    std::vector<EdgeProps> props;
    graph->compute.resize(n);
    graph->in.resize(n);
    for (int v = 0; v < n; ++v) {
      graph->compute[v] = is_compute(nodes[v].kind);
      for (int e : out_edges[v]) {
        const Link& l = links[e / 2];
        ends.emplace_back(v, e % 2 == 0 ? l.b : l.a);
        props.push_back({e, l.latency_ps});
        const int in = e ^ 1;
        graph->in[v].push_back({in % 2 == 0 ? l.a : l.b, in, l.latency_ps});
      }
    }
    graph->g = Graph(boost::edges_are_sorted, ends.begin(), ends.end(), props.begin(),
                     static_cast<std::size_t>(n));
  }
  const Graph& g = graph->g;
  const std::vector<char>& compute = graph->compute;

  // Dijkstra by (latency, hops) with a binary heap and lazy deletion. A compute node other than
  // the source is reached but never expanded (routes do not relay through GPUs or CPUs), so it
  // only keeps its smallest distance and never enters the heap.
  std::vector<Cost> dist(n, kInfinite);
  using Item = std::pair<Cost, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  dist[src] = Cost{0, 0};
  heap.emplace(dist[src], src);
  while (!heap.empty()) {
    const auto [d, u] = heap.top();
    heap.pop();
    if (d != dist[u]) continue;
    for (const GraphEdge& e : boost::make_iterator_range(boost::out_edges(static_cast<std::size_t>(u), g))) {
      const int v = static_cast<int>(boost::target(e, g));
      const Cost c{d.first + g[e].latency_ps, d.second + 1};
      if (c < dist[v]) {
        dist[v] = c;
        if (!compute[v]) heap.emplace(c, v);
      }
    }
  }
  auto combine = [](const Cost& a, const Cost& b) { return Cost{a.first + b.first, a.second + b.second}; };

  // Deterministic predecessor: among the in-edges u→v that lie on a shortest path (u may relay),
  // the one from the smallest u (then the smallest edge id). Links are symmetric, so the in-edges
  // of v are the reverses (id ^ 1) of its out-edges.
  auto routes = std::make_unique<SourceRoutes>();
  routes->pred_edge.assign(n, -1);
  routes->built.assign(n, -1);
  for (int v = 0; v < n; ++v) {
    if (v == src || dist[v] == kInfinite) continue;
    int best_from = -1, best_edge = -1;
    for (const RoutingGraph::In& e : graph->in[v]) {
      const int u = e.from;
      if (dist[u] == kInfinite || (u != src && compute[u])) continue;
      if (combine(dist[u], Cost{e.latency_ps, 1}) != dist[v]) continue;
      if (best_from < 0 || u < best_from || (u == best_from && e.edge < best_edge)) {
        best_from = u;
        best_edge = e.edge;
      }
    }
    routes->pred_edge[v] = best_edge;
  }
  return routes;
}

const std::vector<int>& Topology::Impl::dijkstra_route(int src, int dst,
                                                       const std::string& topology_name) const {
  const int n = static_cast<int>(nodes.size());
  if (cache.size() != static_cast<std::size_t>(n)) cache.resize(n);
  auto& source = cache[src];
  if (!source) source = shortest_paths(src);
  if (source->built[dst] >= 0) return source->routes[source->built[dst]];

  std::vector<int> path;
  for (int v = dst; v != src;) {
    const int e = source->pred_edge[v];
    if (e < 0) {
      throw InvalidArgument(detail::cat(
          "sim: topology '", topology_name, "': no route from \"", nodes[src].name, "\" to \"",
          nodes[dst].name,
          "\" (routes never pass through a gpu or cpu); add a link or a switch joining them"));
    }
    path.push_back(e);
    const Link& l = links[e / 2];
    v = e % 2 == 0 ? l.a : l.b;
  }
  std::reverse(path.begin(), path.end());
  source->built[dst] = static_cast<int>(source->routes.size());
  return source->routes.emplace_back(std::move(path));
}

const std::vector<int>& Topology::route(int src, int dst) const {
  const int n = static_cast<int>(impl_->nodes.size());
  TESSERA_CHECK(src >= 0 && src < n && dst >= 0 && dst < n, "sim: topology '", name,
                "': route from node ", src, " to node ", dst, " asked, but there are ", n,
                " nodes (ids 0..", n - 1, ")");
  if (src == dst) return impl_->empty_route;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->symmetric_routing)
    if (const std::vector<int>* r = impl_->symmetric_route(src, dst, name)) return *r;
  return impl_->dijkstra_route(src, dst, name);
}

void Topology::set_symmetric_routing(bool on) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->symmetric_routing = on;
}

bool Topology::symmetric_routing() const noexcept { return impl_->symmetric_routing; }

}  // namespace tessera::sim
