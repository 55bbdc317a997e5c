// Automorphisms of a topology that map one collective group onto another, found by propagation
// and verified on every link (group_symmetry.hpp).
#include "group_symmetry.hpp"

#include <deque>
#include <map>

namespace tessera::sim::detail_engine {

namespace {

bool same_link(const Link& a, const Link& b) {
  return a.bw_bytes_per_s == b.bw_bytes_per_s && a.latency_ps == b.latency_ps && a.kind == b.kind;
}

bool same_node(const Node& a, const Node& b) { return a.kind == b.kind && a.device == b.device; }

}  // namespace

GroupSymmetry::GroupSymmetry(const Topology& t) : t_(t), out_(t.nodes().size()) {
  const std::int64_t n = static_cast<std::int64_t>(t.nodes().size());
  for (int e = 0; e < t.num_edges(); ++e) out_[t.edge(e).from].push_back(e);
  for (int l = 0; l < static_cast<int>(t.links().size()); ++l) {
    const Link& k = t.links()[l];
    by_ends_.emplace(std::min(k.a, k.b) * n + std::max(k.a, k.b), l);
  }
}

std::optional<std::vector<int>> GroupSymmetry::edge_map(const std::vector<int>& from,
                                                        const std::vector<int>& to) const {
  const std::vector<Node>& nodes = t_.nodes();
  const std::vector<Link>& links = t_.links();
  if (from.size() != to.size()) return std::nullopt;
  // Members on one host stay together: the plans group ranks by host.
  std::map<int, int> host_map, host_back;
  for (std::size_t k = 0; k < from.size(); ++k) {
    const int a = nodes[from[k]].host, b = nodes[to[k]].host;
    if (host_map.emplace(a, b).first->second != b || host_back.emplace(b, a).first->second != a)
      return std::nullopt;
  }
  // σ as a product of swaps u ↔ u', propagated from the members to their neighbours: a neighbour
  // x of u whose link has a twin at u' is fixed when x itself is that twin, swapped with the twin
  // when it is the only candidate, and left alone (fixed) when several are; verification decides.
  const int n = static_cast<int>(nodes.size());
  std::vector<int> sigma(n);
  for (int v = 0; v < n; ++v) sigma[v] = v;
  std::vector<char> set(n, 0);
  std::deque<std::pair<int, int>> queue;
  auto pair = [&](int u, int v) {
    if (set[u] || set[v]) return set[u] && sigma[u] == v;  // only as chosen before
    if (!same_node(nodes[u], nodes[v])) return false;
    sigma[u] = v;
    sigma[v] = u;
    set[u] = set[v] = 1;
    if (u != v) queue.emplace_back(u, v);
    return true;
  };
  for (std::size_t k = 0; k < from.size(); ++k)
    if (!pair(from[k], to[k])) return std::nullopt;
  while (!queue.empty()) {
    const auto [u, v] = queue.front();
    queue.pop_front();
    for (int e : out_[u]) {
      const int x = t_.edge(e).to;
      if (set[x]) continue;
      int twin = -1, candidates = 0;
      bool x_itself = false;
      for (int f : out_[v]) {
        const int y = t_.edge(f).to;
        if (!same_link(links[e / 2], links[f / 2]) || !same_node(nodes[x], nodes[y])) continue;
        if (y == x) x_itself = true;
        if (!set[y]) twin = y, ++candidates;
      }
      if (x_itself)
        pair(x, x);
      else if (candidates == 1)
        pair(x, twin);
    }
  }
  // Verify: every link onto a link with the same figures between the images of its ends, in the
  // same direction (the edge renaming keeps a → b as σa → σb).
  const std::int64_t nn = n;
  std::vector<int> edge(t_.num_edges(), -1);
  std::vector<char> taken(links.size(), 0);  // parallel links: each image once
  for (int l = 0; l < static_cast<int>(links.size()); ++l) {
    const int a = sigma[links[l].a], b = sigma[links[l].b];
    const auto [lo, hi] = by_ends_.equal_range(std::min(a, b) * nn + std::max(a, b));
    int image = -1;
    for (auto it = lo; it != hi && image < 0; ++it)
      if (!taken[it->second] && same_link(links[l], links[it->second])) image = it->second;
    if (image < 0) return std::nullopt;
    taken[image] = 1;
    const bool forward = links[image].a == a;
    edge[2 * l] = 2 * image + (forward ? 0 : 1);
    edge[2 * l + 1] = 2 * image + (forward ? 1 : 0);
  }
  return edge;
}

}  // namespace tessera::sim::detail_engine
