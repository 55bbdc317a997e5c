// Aggregating a TopologyGraph into host boxes, switch boxes and lines, and zooming into a host.
// Every pass is linear in nodes and links (plus a map over the few lines): the view rebuilds it on
// every simulation, at 8,192 GPUs too.
#include "topology_aggregate.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace tessera::studio {

void LinkStats::add(const GraphLink& l) {
  const double u = l.maxUtilisation();
  ++links;
  used += (l.bytes[0] > 0 || l.bytes[1] > 0) ? 1 : 0;
  maxUtilisation = std::max(maxUtilisation, u);
  meanUtilisation += u;  // the sum until finish()
  bytes += l.bytes[0] + l.bytes[1];
  bwBytesPerS = std::max(bwBytesPerS, l.bwBytesPerS);
}

void LinkStats::finish() { meanUtilisation = links > 0 ? meanUtilisation / links : 0; }

namespace {

bool isCompute(const GraphNode& n) {
  return n.kind == QLatin1String("gpu") || n.kind == QLatin1String("cpu");
}

/// The row buildTopologyGraph puts a node kind in (0: network switches at the top, 4: devices).
int rowOfKind(const QString& kind) {
  if (kind == QLatin1String("gpu") || kind == QLatin1String("cpu")) return 4;
  if (kind == QLatin1String("nvswitch")) return 3;
  if (kind == QLatin1String("pcie_switch") || kind == QLatin1String("host_bridge")) return 2;
  if (kind == QLatin1String("nic")) return 1;
  return 0;
}

/// "node3" from "node3/gpu0" (the presets' naming); "host 3" when the name has no machine part.
QString hostLabel(const GraphNode& n) {
  const int slash = n.name.indexOf('/');
  return slash > 0 ? n.name.left(slash) : QStringLiteral("host %1").arg(n.host);
}

/// "node0–7" for node0 … node7: the last one without the name both share.
QString hostRange(const QString& first, const QString& last) {
  int k = 0;
  while (k < first.size() && k < last.size() && first[k] == last[k] && !first[k].isDigit()) ++k;
  return QStringLiteral("%1–%2").arg(first, last.mid(k));
}

/// Boxes for the hosts: `hostsPerBox` consecutive hosts (by host id) per box.
void assignHosts(const TopologyGraph& g, const AggregateOptions& o, AggregatedTopology& a) {
  const std::vector<int> hosts = graphHosts(g);
  a.hosts = static_cast<int>(hosts.size());
  const int maxBoxes = std::max(1, o.maxHostBoxes);
  a.hostsPerBox = a.hosts <= maxBoxes ? 1 : (a.hosts + maxBoxes - 1) / maxBoxes;
  std::unordered_map<int, int> index;
  for (int k = 0; k < a.hosts; ++k) index.emplace(hosts[k], k);
  a.boxes.resize((a.hosts + a.hostsPerBox - 1) / a.hostsPerBox);
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i)
    if (g.nodes[i].host >= 0) a.boxOfNode[i] = index.at(g.nodes[i].host) / a.hostsPerBox;
}

/// Boxes for the cluster switches (host -1): one each when few; otherwise the switches whose host
/// neighbours all lie in one host box share a box (a fat tree's leaves of those hosts), and the
/// rest (spines, rail leaves that reach every host) are chunked in index order.
void assignSwitches(const TopologyGraph& g, const AggregateOptions& o, AggregatedTopology& a) {
  std::vector<int> switches;
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i)
    if (g.nodes[i].host < 0) switches.push_back(i);
  // served[i]: -2 no host neighbour, -1 several host boxes, else the one host box.
  std::unordered_map<int, int> served;
  for (int s : switches) served[s] = -2;
  for (const GraphLink& l : g.links)
    for (const auto& [sw, other] : {std::pair(l.a, l.b), std::pair(l.b, l.a)}) {
      auto it = served.find(sw);
      if (it == served.end() || g.nodes[other].host < 0) continue;
      const int box = a.boxOfNode[other];
      it->second = it->second == -2 ? box : it->second == box ? box : -1;
    }
  const bool group = static_cast<int>(switches.size()) > o.maxSwitchBoxes;
  std::map<int, int> byHostBox;  // host box → its leaf group's box
  std::vector<int> rest;
  for (int s : switches) {
    if (group && served[s] >= 0) {
      auto [it, added] = byHostBox.emplace(served[s], static_cast<int>(a.boxes.size()));
      if (added) a.boxes.emplace_back();
      a.boxOfNode[s] = it->second;
    } else {
      rest.push_back(s);
    }
  }
  const int room = std::max(1, o.maxSwitchBoxes - static_cast<int>(byHostBox.size()));
  const int chunk = group ? std::max<int>(1, (static_cast<int>(rest.size()) + room - 1) / room) : 1;
  for (std::size_t k = 0; k < rest.size(); ++k) {
    if (k % chunk == 0) a.boxes.emplace_back();
    a.boxOfNode[rest[k]] = static_cast<int>(a.boxes.size()) - 1;
  }
  for (int s : switches) {
    int& level = a.boxes[a.boxOfNode[s]].level;
    level = std::max(level, served[s] == -2 ? 2 : 1);
  }
}

/// Members, devices, ranks, hosts and label of every box.
void describeBoxes(const TopologyGraph& g, AggregatedTopology& a) {
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    const GraphNode& n = g.nodes[i];
    AggregateBox& b = a.boxes[a.boxOfNode[i]];
    b.nodes.push_back(i);
    b.devices += isCompute(n) ? 1 : 0;
    if (n.rank >= 0) {
      b.firstRank = b.firstRank < 0 ? n.rank : std::min(b.firstRank, n.rank);
      b.lastRank = std::max(b.lastRank, n.rank);
    }
    if (n.host >= 0) {
      b.firstHost = b.firstHost < 0 ? n.host : std::min(b.firstHost, n.host);
      b.lastHost = std::max(b.lastHost, n.host);
    }
  }
  for (AggregateBox& b : a.boxes) {
    if (b.nodes.empty()) continue;
    const GraphNode& front = g.nodes[b.nodes.front()];
    const GraphNode& back = g.nodes[b.nodes.back()];
    if (b.level == 0)
      b.label = b.firstHost == b.lastHost ? hostLabel(front)
                                          : hostRange(hostLabel(front), hostLabel(back));
    else
      b.label = b.nodes.size() == 1
                    ? front.name
                    : QStringLiteral("%1 … %2 (%3)").arg(front.name, back.name).arg(b.nodes.size());
  }
}

/// Links inside a box go to the box; the others to the line of their two boxes and kind.
void assignLinks(const TopologyGraph& g, AggregatedTopology& a) {
  std::map<std::tuple<int, int, QString>, int> lineOf;
  for (int i = 0; i < static_cast<int>(g.links.size()); ++i) {
    const GraphLink& l = g.links[i];
    const int ba = a.boxOfNode[l.a], bb = a.boxOfNode[l.b];
    if (ba == bb) {
      a.boxOfLink[i] = ba;
      a.boxes[ba].links.push_back(i);
      a.boxes[ba].inner.add(l);
      continue;
    }
    const auto key = std::make_tuple(std::min(ba, bb), std::max(ba, bb), l.kind);
    auto [it, added] = lineOf.emplace(key, static_cast<int>(a.lines.size()));
    if (added) a.lines.push_back({std::get<0>(key), std::get<1>(key), l.kind, {}, {}});
    AggregateLine& line = a.lines[it->second];
    a.lineOfLink[i] = it->second;
    line.links.push_back(i);
    line.stats.add(l);
  }
  for (AggregateBox& b : a.boxes) b.inner.finish();
  for (AggregateLine& l : a.lines) l.stats.finish();
}

/// Hosts along the bottom, switches linked to hosts in the middle, the switches above at the top.
void placeBoxes(AggregatedTopology& a) {
  std::vector<int> count(3, 0), seen(3, 0);
  for (const AggregateBox& b : a.boxes) ++count[b.level];
  static const double rowY[3] = {0.9, 0.5, 0.1};
  for (AggregateBox& b : a.boxes) {
    const int k = seen[b.level]++;
    b.pos = QPointF((k + 0.5) / count[b.level], rowY[b.level]);
  }
}

}  // namespace

std::vector<int> graphHosts(const TopologyGraph& g) {
  std::vector<int> hosts;
  for (const GraphNode& n : g.nodes)
    if (n.host >= 0) hosts.push_back(n.host);
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  return hosts;
}

bool needsAggregation(const TopologyGraph& g, const AggregateOptions& o) {
  const auto devices = std::count_if(g.nodes.begin(), g.nodes.end(), isCompute);
  return devices > o.fullMaxDevices && graphHosts(g).size() > 1;
}

AggregatedTopology aggregateTopology(const TopologyGraph& g, const AggregateOptions& o) {
  AggregatedTopology a;
  a.boxOfNode.assign(g.nodes.size(), -1);
  a.lineOfLink.assign(g.links.size(), -1);
  a.boxOfLink.assign(g.links.size(), -1);
  assignHosts(g, o, a);
  assignSwitches(g, o, a);
  describeBoxes(g, a);
  assignLinks(g, a);
  placeBoxes(a);
  return a;
}

HostView hostSubgraph(const TopologyGraph& g, int host) {
  HostView v;
  std::vector<int> local(g.nodes.size(), -1);
  auto take = [&](int node) {
    if (local[node] >= 0) return;
    local[node] = static_cast<int>(v.nodeIds.size());
    v.nodeIds.push_back(node);
  };
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i)
    if (g.nodes[i].host == host) take(i);
  for (int i = 0; i < static_cast<int>(g.links.size()); ++i) {
    const GraphLink& l = g.links[i];
    if (g.nodes[l.a].host != host && g.nodes[l.b].host != host) continue;
    take(l.a);
    take(l.b);
    v.linkIds.push_back(i);
  }
  v.graph.name = g.name;
  v.graph.description = g.description;
  std::vector<std::vector<int>> rows(5);
  for (int k = 0; k < static_cast<int>(v.nodeIds.size()); ++k) {
    v.graph.nodes.push_back(g.nodes[v.nodeIds[k]]);
    rows[rowOfKind(v.graph.nodes.back().kind)].push_back(k);
  }
  for (int row = 0; row < 5; ++row)
    for (std::size_t k = 0; k < rows[row].size(); ++k)
      v.graph.nodes[rows[row][k]].pos =
          QPointF((k + 0.5) / static_cast<double>(rows[row].size()), 0.05 + 0.9 * row / 4.0);
  for (int i : v.linkIds) {
    GraphLink l = g.links[i];
    l.a = local[l.a];
    l.b = local[l.b];
    v.graph.links.push_back(std::move(l));
  }
  return v;
}

}  // namespace tessera::studio
