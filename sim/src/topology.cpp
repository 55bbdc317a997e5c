// Topology: vertices, links, accessors and the human summary (routing, presets and JSON live in
// their own files).
#include "tessera/sim/topology.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "tessera/core/error.hpp"
#include "topology_impl.hpp"

namespace tessera::sim {

namespace {
constexpr const char* kKindNames[] = {"gpu",         "cpu", "nvswitch", "pcie_switch",
                                      "host_bridge", "nic", "net_switch"};
constexpr int kNumKinds = 7;
}  // namespace

std::string node_kind_name(NodeKind k) { return kKindNames[static_cast<int>(k)]; }

NodeKind parse_node_kind(const std::string& s) {
  for (int i = 0; i < kNumKinds; ++i)
    if (s == kKindNames[i]) return static_cast<NodeKind>(i);
  throw InvalidArgument(detail::cat(
      "sim: unknown node kind \"", s,
      "\"; use one of gpu, cpu, nvswitch, pcie_switch, host_bridge, nic, net_switch"));
}

bool is_compute(NodeKind k) noexcept { return k == NodeKind::Gpu || k == NodeKind::Cpu; }

Topology::Topology() : impl_(std::make_unique<Impl>()) {}
Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

Topology::Topology(const Topology& o) : name(o.name), impl_(std::make_unique<Impl>()) {
  impl_->nodes = o.impl_->nodes;
  impl_->links = o.impl_->links;
  impl_->by_name = o.impl_->by_name;
  impl_->out_edges = o.impl_->out_edges;
  impl_->symmetric_routing = o.impl_->symmetric_routing;
}

Topology& Topology::operator=(const Topology& o) {
  if (this != &o) *this = Topology(o);
  return *this;
}

int Topology::add_node(Node n) {
  TESSERA_CHECK(!n.name.empty(), "sim: topology '", name,
                "': a node has an empty name; give every node a unique name");
  TESSERA_CHECK(!impl_->by_name.count(n.name), "sim: topology '", name, "': duplicate node name \"",
                n.name, "\"; node names must be unique");
  TESSERA_CHECK(!is_compute(n.kind) || !n.device.empty(), "sim: topology '", name, "': node \"",
                n.name, "\" is a ", node_kind_name(n.kind),
                " without a device; name its catalog entry (e.g. \"a100-80gb\")");
  TESSERA_CHECK(is_compute(n.kind) || n.device.empty(), "sim: topology '", name, "': node \"",
                n.name, "\" is a ", node_kind_name(n.kind), " but names device \"", n.device,
                "\"; only gpu and cpu nodes have a device");
  TESSERA_CHECK(n.host >= -1, "sim: topology '", name, "': node \"", n.name, "\" has host ",
                n.host, "; use a machine index ≥ 0, or -1 for a cluster switch");
  const int id = static_cast<int>(impl_->nodes.size());
  impl_->by_name.emplace(n.name, id);
  impl_->nodes.push_back(std::move(n));
  impl_->out_edges.emplace_back();
  impl_->invalidate_routes();
  return id;
}

int Topology::add_link(int a, int b, double bw_bytes_per_s, Picos latency_ps, std::string kind) {
  const int n = static_cast<int>(impl_->nodes.size());
  TESSERA_CHECK(a >= 0 && a < n && b >= 0 && b < n, "sim: topology '", name, "': link ", a, "–",
                b, " names a node that does not exist (", n, " nodes); add the nodes first");
  const std::string where = impl_->nodes[a].name + " – " + impl_->nodes[b].name;
  TESSERA_CHECK(a != b, "sim: topology '", name, "': link ", where,
                " joins a node to itself; links join two different nodes");
  TESSERA_CHECK(bw_bytes_per_s > 0 && bw_bytes_per_s < 1e18, "sim: topology '", name, "': link ",
                where, " has bandwidth ", bw_bytes_per_s,
                " bytes/s; give a positive bandwidth per direction");
  TESSERA_CHECK(latency_ps >= 0 && latency_ps <= kPicosPerSecond, "sim: topology '", name,
                "': link ", where, " has latency ", latency_ps,
                " ps; give a one-way latency between 0 and 1 s");
  const int id = static_cast<int>(impl_->links.size());
  impl_->links.push_back(Link{a, b, bw_bytes_per_s, latency_ps, std::move(kind)});
  impl_->out_edges[a].push_back(2 * id);
  impl_->out_edges[b].push_back(2 * id + 1);
  impl_->invalidate_routes();
  return id;
}

const std::vector<Node>& Topology::nodes() const noexcept { return impl_->nodes; }
const std::vector<Link>& Topology::links() const noexcept { return impl_->links; }

int Topology::find_node(const std::string& n) const noexcept {
  const auto it = impl_->by_name.find(n);
  return it == impl_->by_name.end() ? -1 : it->second;
}

std::vector<int> Topology::devices() const {
  std::vector<int> gpus, cpus;
  for (int i = 0; i < static_cast<int>(impl_->nodes.size()); ++i) {
    if (impl_->nodes[i].kind == NodeKind::Gpu) gpus.push_back(i);
    if (impl_->nodes[i].kind == NodeKind::Cpu) cpus.push_back(i);
  }
  return gpus.empty() ? cpus : gpus;
}

int Topology::num_hosts() const {
  std::set<int> hosts;
  for (const Node& n : impl_->nodes)
    if (n.host >= 0) hosts.insert(n.host);
  return static_cast<int>(hosts.size());
}

int Topology::num_edges() const noexcept { return 2 * static_cast<int>(impl_->links.size()); }

DirectedEdge Topology::edge(int edge_id) const {
  TESSERA_CHECK(edge_id >= 0 && edge_id < num_edges(), "sim: topology '", name,
                "': directed edge ", edge_id, " does not exist (", num_edges(), " edges)");
  const Link& l = impl_->links[edge_id / 2];
  return edge_id % 2 == 0 ? DirectedEdge{edge_id / 2, l.a, l.b} : DirectedEdge{edge_id / 2, l.b, l.a};
}

double Topology::edge_bw(int edge_id) const { return impl_->links[edge(edge_id).link].bw_bytes_per_s; }
Picos Topology::edge_latency(int edge_id) const {
  return impl_->links[edge(edge_id).link].latency_ps;
}

Picos Topology::route_latency(int src, int dst) const {
  Picos t = 0;
  for (int e : route(src, dst)) t += impl_->links[e / 2].latency_ps;
  return t;
}

double Topology::route_bw(int src, int dst) const {
  const auto& r = route(src, dst);
  if (r.empty()) return 0;
  double bw = impl_->links[r[0] / 2].bw_bytes_per_s;
  for (int e : r) bw = std::min(bw, impl_->links[e / 2].bw_bytes_per_s);
  return bw;
}

void Topology::check_devices(const DeviceCatalog& catalog) const {
  for (const Node& n : impl_->nodes) {
    if (!is_compute(n.kind) || catalog.contains(n.device)) continue;
    std::string known;
    for (const auto& k : catalog.names()) known += (known.empty() ? "" : ", ") + k;
    throw InvalidArgument(detail::cat("sim: topology '", name, "': node \"", n.name,
                                      "\" names unknown device \"", n.device, "\"; known: ",
                                      known, " (add it with a device file)"));
  }
}

std::string Topology::describe() const {
  std::map<std::string, int> devices;
  for (int d : this->devices()) devices[impl_->nodes[d].device]++;
  std::map<std::string, double> fastest;  // per link kind: the fastest link
  for (const Link& l : impl_->links) fastest[l.kind] = std::max(fastest[l.kind], l.bw_bytes_per_s);
  std::string s;
  for (const auto& [dev, count] : devices) s += detail::cat(s.empty() ? "" : " + ", count, "× ", dev);
  const int hosts = num_hosts();
  s += detail::cat(", ", hosts, hosts == 1 ? " host" : " hosts");
  for (const auto& [kind, bw] : fastest) {
    char buf[64];
    std::snprintf(buf, sizeof buf, ", %s up to %g GB/s", kind.c_str(), bw / 1e9);
    s += buf;
  }
  return s + " per direction";
}

}  // namespace tessera::sim
