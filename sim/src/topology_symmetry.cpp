// Routing through host symmetry: hosts with identical nodes, links and attachments to the cluster
// switches are interchangeable, so a route between two hosts is searched once between the first
// two hosts of their classes and renamed for every other pair. The cost of routing a cluster then
// grows with its classes of hosts, not with its hosts squared (issue 34: 16,384 GPUs).
#include <algorithm>
#include <map>
#include <tuple>

#include "topology_impl.hpp"

namespace tessera::sim {

namespace {

/// A host's shape: what must be equal for two hosts to be swapped by an automorphism that fixes
/// every other node. Node kinds and devices in order; every owned link in id order with its ends
/// as local positions (or cluster node ids, negated and shifted), figures and kind.
using LinkShape = std::tuple<int, int, double, Picos, std::string>;
struct HostShape {
  std::vector<std::pair<NodeKind, std::string>> nodes;
  std::vector<LinkShape> links;
  bool operator<(const HostShape& o) const {
    return std::tie(nodes, links) < std::tie(o.nodes, o.links);
  }
};

}  // namespace

/// Builds the classes, or leaves `valid` false when the topology does not have the form the
/// renaming relies on: each host's nodes contiguous in id order, every cluster node after every
/// host node (so renaming keeps the order of the vertex ids the routes' tie-break compares), no
/// link joining two hosts directly.
static std::unique_ptr<HostSymmetry> build_symmetry(const std::vector<Node>& nodes,
                                                    const std::vector<Link>& links) {
  auto s = std::make_unique<HostSymmetry>();
  const int n = static_cast<int>(nodes.size());
  s->host_of.assign(n, -1);
  s->local.assign(n, 0);
  std::map<int, int> index;  // Node::host → position in s->hosts
  bool cluster_seen = false;
  for (int v = 0; v < n; ++v) {
    const int h = nodes[v].host;
    if (h < 0) {
      cluster_seen = true;
      continue;
    }
    if (cluster_seen) return s;  // a host node after a cluster node
    auto [it, fresh] = index.emplace(h, static_cast<int>(s->hosts.size()));
    if (fresh) {
      s->hosts.push_back({v, 0, {}});
    } else if (it->second != static_cast<int>(s->hosts.size()) - 1) {
      return s;  // the host's nodes are not contiguous
    }
    s->host_of[v] = it->second;
    s->local[v] = v - s->hosts[it->second].first_node;
  }
  if (s->hosts.size() < 2) return s;
  s->link_owner.assign(links.size(), -1);
  s->link_local.assign(links.size(), 0);
  std::vector<HostShape> shape(s->hosts.size());
  for (int v = 0; v < n; ++v)
    if (s->host_of[v] >= 0) shape[s->host_of[v]].nodes.emplace_back(nodes[v].kind, nodes[v].device);
  const auto end = [&](int v) { return s->host_of[v] >= 0 ? s->local[v] : -1 - v; };
  for (int l = 0; l < static_cast<int>(links.size()); ++l) {
    const Link& k = links[l];
    const int ha = s->host_of[k.a], hb = s->host_of[k.b];
    if (ha >= 0 && hb >= 0 && ha != hb) return s;  // two hosts joined directly
    const int owner = ha >= 0 ? ha : hb;
    if (owner < 0) continue;  // switch to switch
    s->link_owner[l] = owner;
    s->link_local[l] = static_cast<int>(s->hosts[owner].links.size());
    s->hosts[owner].links.push_back(l);
    shape[owner].links.emplace_back(end(k.a), end(k.b), k.bw_bytes_per_s, k.latency_ps, k.kind);
  }
  std::map<HostShape, int> classes;
  for (std::size_t h = 0; h < s->hosts.size(); ++h) {
    auto [it, fresh] = classes.emplace(std::move(shape[h]), static_cast<int>(s->reps.size()));
    if (fresh) s->reps.emplace_back();
    s->hosts[h].cls = it->second;
    if (s->reps[it->second].size() < 2) s->reps[it->second].push_back(static_cast<int>(h));
  }
  s->valid = s->reps.size() < s->hosts.size();  // some host has a twin
  return s;
}

std::vector<Topology::NodePlace> Topology::node_places() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (!impl_->symmetry) impl_->symmetry = build_symmetry(impl_->nodes, impl_->links);
  const HostSymmetry& s = *impl_->symmetry;
  std::vector<NodePlace> places(impl_->nodes.size());
  if (!s.valid) return places;
  for (std::size_t v = 0; v < places.size(); ++v) {
    const int h = s.host_of[v];
    if (h >= 0) places[v] = {s.hosts[h].cls, h, s.local[v]};
  }
  return places;
}

const std::vector<int>* Topology::Impl::symmetric_route(int src, int dst,
                                                        const std::string& topology_name) const {
  if (!symmetry) symmetry = build_symmetry(nodes, links);
  const HostSymmetry& s = *symmetry;
  if (!s.valid) return nullptr;
  const int hs = s.host_of[src], hd = s.host_of[dst];
  if (hs < 0 || hd < 0) return nullptr;
  const std::int64_t key =
      static_cast<std::int64_t>(src) * static_cast<std::int64_t>(nodes.size()) + dst;
  if (auto it = symmetric_index.find(key); it != symmetric_index.end())
    return &symmetric_routes[it->second];
  // The representatives: one host for a route within a host; two of the class, in the pair's own
  // order, between two hosts of one class; each class's first between two classes.
  const int cs = s.hosts[hs].cls, cd = s.hosts[hd].cls;
  int rs = s.reps[cs][0], rd = s.reps[cd][0];
  if (hs != hd && cs == cd) {
    rs = s.reps[cs][hs < hd ? 0 : 1];
    rd = s.reps[cs][hs < hd ? 1 : 0];
  }
  if (rs == hs && rd == hd) return nullptr;  // the pair is its own representative
  const std::vector<int>& model = dijkstra_route(
      s.hosts[rs].first_node + s.local[src], s.hosts[rd].first_node + s.local[dst], topology_name);
  std::vector<int> route;
  route.reserve(model.size());
  for (int e : model) {
    const int l = e / 2, owner = s.link_owner.empty() ? -1 : s.link_owner[l];
    int to = -1;  // the host whose copy of the link the renamed route takes
    if (owner < 0) {
      route.push_back(e);
      continue;
    }
    if (owner == rs)
      to = hs;
    else if (owner == rd)
      to = hd;
    else
      return nullptr;  // through a third host: search this pair itself
    route.push_back(2 * s.hosts[to].links[s.link_local[l]] + e % 2);
  }
  symmetric_index.emplace(key, static_cast<int>(symmetric_routes.size()));
  return &symmetric_routes.emplace_back(std::move(route));
}

}  // namespace tessera::sim
