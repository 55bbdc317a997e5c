// The topology graph: its topology-only base (built once per topology) and one result's figures
// applied to a copy of it; buildTopologyGraph does both.
#include "topology_graph.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <string_view>

namespace tessera::studio {

namespace {

int rowOf(sim::NodeKind k) {
  switch (k) {
    case sim::NodeKind::Gpu:
    case sim::NodeKind::Cpu:
      return 4;
    case sim::NodeKind::NvSwitch:
      return 3;
    case sim::NodeKind::PcieSwitch:
    case sim::NodeKind::HostBridge:
      return 2;
    case sim::NodeKind::Nic:
      return 1;
    case sim::NodeKind::NetSwitch:
      return 0;
  }
  return 0;
}

std::uint64_t pairKey(int from, int to) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(from)) << 32) |
         static_cast<std::uint32_t>(to);
}

/// Nodes in five rows by kind, each row ordered by host: compute nodes at the bottom.
void layOutNodes(const sim::Topology& topo, TopologyGraph& g) {
  const std::vector<sim::Node>& nodes = topo.nodes();
  std::vector<std::vector<int>> rows(5);
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) rows[rowOf(nodes[i].kind)].push_back(i);
  g.nodes.resize(nodes.size());
  for (int row = 0; row < 5; ++row) {
    auto& ids = rows[row];
    std::stable_sort(ids.begin(), ids.end(),
                     [&](int a, int b) { return nodes[a].host < nodes[b].host; });
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const sim::Node& n = nodes[ids[k]];
      GraphNode& gn = g.nodes[ids[k]];
      gn.name = QString::fromStdString(n.name);
      gn.kind = QString::fromStdString(sim::node_kind_name(n.kind));
      gn.device = QString::fromStdString(n.device);
      gn.host = n.host;
      gn.pos = QPointF((k + 0.5) / static_cast<double>(ids.size()), 0.05 + 0.9 * row / 4.0);
    }
  }
}

/// Halo transfers: each send of the trace along the topology's own route between the two ranks.
void addTransfers(const TopologyBase& base, const sim::Topology& topo, const sim::SimResult& r,
                  TopologyGraph& g) {
  const std::vector<int>& devices = base.devices;
  std::unordered_map<std::string, QString> layers;  // one shared QString per layer name
  for (const core::TraceEvent& e : r.trace) {
    if (e.ph != 'X' || e.cat != "halo" || !e.flow_out || e.peer < 0) continue;
    if (e.pid >= static_cast<int>(devices.size()) || e.peer >= static_cast<int>(devices.size()))
      continue;
    auto layer = layers.find(e.layer);
    if (layer == layers.end())
      layer = layers.emplace(e.layer, QString::fromStdString(e.layer)).first;
    for (int edge : topo.route(devices[e.pid], devices[e.peer])) {
      const sim::DirectedEdge de = topo.edge(edge);
      g.links[de.link].transfers.push_back(
          {e.pid, e.peer, layer->second, e.bytes, de.from == g.links[de.link].a});
    }
  }
}

/// The bytes sim's collective model put on each direction of each link, one entry per collective
/// and link: bucketed by link (stable, so in the order the collectives started) into a CSR index.
/// O(entries), one hash lookup each; no per-entry strings.
void indexCollectives(const TopologyBase& base, const sim::Topology& topo, const sim::SimResult& r,
                      TopologyGraph& g) {
  struct Use {
    int link, collective, dir;
    double bytes;
  };
  std::vector<Use> uses;
  std::size_t entries = 0;
  for (const sim::CollectiveUse& c : r.collectives) entries += c.links.size();
  uses.reserve(entries);
  g.collectiveInfo.reserve(r.collectives.size());
  const auto lookUp = [&](const sim::CollectiveLinkBytes& lb) {
    const auto it = base.linkOf.find(pairKey(topo.find_node(lb.from), topo.find_node(lb.to)));
    return it == base.linkOf.end() ? std::pair(-1, -1) : it->second;
  };
  // The gradient buckets of one group put their bytes on the same links in the same order: the
  // previous collective of the group and algorithm is a hint, two string compares per entry
  // instead of two hash lookups (hundreds of thousands of entries at 8,192 GPUs).
  std::map<std::pair<std::vector<int>, std::string>, int> lastOfGroup;
  std::vector<std::vector<std::pair<int, int>>> resolved(r.collectives.size());
  for (int id = 0; id < static_cast<int>(r.collectives.size()); ++id) {
    const sim::CollectiveUse& c = r.collectives[id];
    g.collectiveInfo.push_back({QString::fromStdString(c.name), QString::fromStdString(c.layer),
                                QString::fromStdString(c.algorithm),
                                static_cast<int>(c.ranks.size()), c.bytes});
    int& last = lastOfGroup.try_emplace({c.ranks, c.algorithm}, -1).first->second;
    const sim::CollectiveUse* hint = last >= 0 ? &r.collectives[last] : nullptr;
    std::vector<std::pair<int, int>>& ids = resolved[id];
    ids.reserve(c.links.size());
    for (std::size_t k = 0; k < c.links.size(); ++k) {
      const sim::CollectiveLinkBytes& lb = c.links[k];
      const bool same = hint && k < hint->links.size() && hint->links[k].from == lb.from &&
                        hint->links[k].to == lb.to;
      ids.push_back(same ? resolved[last][k] : lookUp(lb));
      if (ids.back().first >= 0)
        uses.push_back({ids.back().first, id, ids.back().second, lb.bytes});
    }
    if (last >= 0) std::vector<std::pair<int, int>>().swap(resolved[last]);  // no longer a hint
    last = id;
  }
  const int numLinks = static_cast<int>(g.links.size());
  std::vector<int> start(numLinks + 1, 0);
  for (const Use& u : uses) ++start[u.link + 1];
  for (int i = 0; i < numLinks; ++i) start[i + 1] += start[i];
  std::vector<int> next(start.begin(), start.end() - 1);
  std::vector<CollectiveOnLink> sorted(uses.size());
  for (const Use& u : uses) {  // a collective's entries for one link end up adjacent: merged next
    CollectiveOnLink& e = sorted[next[u.link]++];
    e.collective = u.collective;
    e.bytes[u.dir] = u.bytes;
  }
  g.collectiveStart.assign(numLinks + 1, 0);
  g.collectiveUses.reserve(sorted.size());
  for (int i = 0; i < numLinks; ++i) {
    g.collectiveStart[i] = static_cast<int>(g.collectiveUses.size());
    for (int k = start[i]; k < start[i + 1]; ++k) {
      const CollectiveOnLink& e = sorted[k];
      if (static_cast<int>(g.collectiveUses.size()) > g.collectiveStart[i] &&
          g.collectiveUses.back().collective == e.collective) {
        g.collectiveUses.back().bytes[0] += e.bytes[0];
        g.collectiveUses.back().bytes[1] += e.bytes[1];
      } else {
        g.collectiveUses.push_back(e);
      }
    }
  }
  g.collectiveStart[numLinks] = static_cast<int>(g.collectiveUses.size());
}

}  // namespace

std::uint64_t topologyFingerprint(const sim::Topology& topo, int numRanks) {
  // FNV-style mixing of std::hash values: cheap next to building the graph (O(nodes + links)).
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  const std::hash<std::string_view> text;
  mix(text(topo.name));
  mix(static_cast<std::uint64_t>(numRanks));
  for (const sim::Node& n : topo.nodes()) {
    mix(text(n.name));
    mix(text(n.device));
    mix(static_cast<std::uint64_t>(n.kind) * 31 + static_cast<std::uint64_t>(n.host + 1));
  }
  for (const sim::Link& l : topo.links()) {
    mix(pairKey(l.a, l.b));
    mix(text(l.kind));
    mix(std::hash<double>{}(l.bw_bytes_per_s));
  }
  return h;
}

std::shared_ptr<const TopologyBase> buildTopologyBase(const sim::Topology& topo, int numRanks) {
  auto base = std::make_shared<TopologyBase>();
  TopologyGraph& g = base->graph;
  g.name = QString::fromStdString(topo.name);
  g.description = QString::fromStdString(topo.describe());
  layOutNodes(topo, g);
  base->devices = topo.devices();
  for (int rank = 0; rank < numRanks && rank < static_cast<int>(base->devices.size()); ++rank)
    g.nodes[base->devices[rank]].rank = rank;
  std::unordered_map<std::string, QString> kinds;  // one shared QString per link kind
  g.links.reserve(topo.links().size());
  for (const sim::Link& l : topo.links()) {
    GraphLink gl;
    gl.a = l.a;
    gl.b = l.b;
    auto kind = kinds.find(l.kind);
    if (kind == kinds.end()) kind = kinds.emplace(l.kind, QString::fromStdString(l.kind)).first;
    gl.kind = kind->second;
    gl.bwBytesPerS = l.bw_bytes_per_s;
    g.links.push_back(gl);
  }
  // (from, to) → the first link joining them and the direction: one hash lookup per link use
  // and collective step instead of a scan of every link (O(links²) at thousands of GPUs).
  base->linkOf.reserve(2 * g.links.size());
  for (int i = 0; i < static_cast<int>(g.links.size()); ++i) {
    base->linkOf.emplace(pairKey(g.links[i].a, g.links[i].b), std::pair(i, 0));
    base->linkOf.emplace(pairKey(g.links[i].b, g.links[i].a), std::pair(i, 1));
  }
  base->fingerprint = topologyFingerprint(topo, numRanks);
  return base;
}

TopologyGraph applyResult(const TopologyBase& base, const sim::Topology& topo,
                          const sim::SimResult& r) {
  TopologyGraph g = base.graph;  // QStrings shared, not copied
  const auto find = [&](const std::string& from, const std::string& to) -> std::pair<int, int> {
    const auto it = base.linkOf.find(pairKey(topo.find_node(from), topo.find_node(to)));
    return it == base.linkOf.end() ? std::pair(-1, -1) : it->second;
  };
  for (const sim::LinkUse& u : r.links) {
    const auto [link, dir] = find(u.from, u.to);
    if (link < 0) continue;
    g.links[link].utilisation[dir] = u.utilisation;
    g.links[link].bytes[dir] = u.bytes;
  }
  addTransfers(base, topo, r, g);
  indexCollectives(base, topo, r, g);
  if (static_cast<int>(base.devices.size()) <= kListedCollectivesMaxDevices)
    for (int i = 0; i < static_cast<int>(g.links.size()); ++i)
      g.links[i].collectives = g.collectivesOf(i);
  return g;
}

std::vector<LinkCollective> TopologyGraph::collectivesOf(int link) const {
  std::vector<LinkCollective> out;
  if (link < 0 || link + 1 >= static_cast<int>(collectiveStart.size())) return out;
  for (int k = collectiveStart[link]; k < collectiveStart[link + 1]; ++k) {
    const CollectiveOnLink& u = collectiveUses[k];
    out.push_back(collectiveInfo[u.collective]);
    out.back().bytes[0] = u.bytes[0];
    out.back().bytes[1] = u.bytes[1];
  }
  return out;
}

TopologyGraph buildTopologyGraph(const sim::Topology& topo, const sim::SimResult& r, int numRanks) {
  return applyResult(*buildTopologyBase(topo, numRanks), topo, r);
}

std::shared_ptr<const TopologyBase> TopologyCache::get(const sim::Topology& topo, int numRanks) {
  const std::uint64_t f = topologyFingerprint(topo, numRanks);
  if (!base_ || base_->fingerprint != f) {
    base_ = buildTopologyBase(topo, numRanks);
    ++builds_;
  }
  return base_;
}

}  // namespace tessera::studio
