// The presets of the systems people buy now (issue 34): HGX B200, GB200 NVL72 racks, HGX H20,
// 8× MI300X/MI325X/MI355X and L40S machines, families joined in one job, and the scale limits.
#include <chrono>
#include <set>

#include "sim_test_util.hpp"
#include "tessera/sim/engine.hpp"

using namespace tessera;
using namespace tessera::sim;
using tessera::simtest::error_of;
using tessera::simtest::lacks;

namespace {

int node(const Topology& t, const std::string& name) {
  const int id = t.find_node(name);
  REQUIRE(id >= 0);
  return id;
}
double bw(const Topology& t, const std::string& a, const std::string& b) {
  return t.route_bw(node(t, a), node(t, b));
}
Picos latency(const Topology& t, const std::string& a, const std::string& b) {
  return t.route_latency(node(t, a), node(t, b));
}
/// The node names along route(a, b), a first, and the kinds of the links it crosses.
std::vector<std::string> hops(const Topology& t, const std::string& a, const std::string& b) {
  std::vector<std::string> names{a};
  for (int e : t.route(node(t, a), node(t, b))) names.push_back(t.nodes()[t.edge(e).to].name);
  return names;
}
std::set<std::string> link_kinds(const Topology& t, const std::string& a, const std::string& b) {
  std::set<std::string> kinds;
  for (int e : t.route(node(t, a), node(t, b))) kinds.insert(t.links()[t.edge(e).link].kind);
  return kinds;
}

/// What the host symmetry relies on: each host's nodes contiguous in id order, hosts numbered
/// in order, every cluster node (host -1) after every host node.
void require_host_order(const Topology& t) {
  int last = -1;
  bool cluster = false;
  for (const Node& n : t.nodes()) {
    if (n.host < 0) {
      cluster = true;
      continue;
    }
    REQUIRE(!cluster);
    REQUIRE((n.host == last || n.host == last + 1));
    last = n.host;
  }
}

constexpr Picos kNvlinkHop = 600'000;                      // GPU → switch → GPU
constexpr Picos kAcrossHosts = 4 * 500'000 + 2 * 600'000;  // PCIe ×2, IB port ×2 each side

}  // namespace

TEST_CASE("each new preset has its GPUs, devices and hosts, in the order symmetry needs", "[sim]") {
  struct Case {
    std::string name, device;
    int gpus, hosts;
  };
  const std::vector<Case> cases = {
      {"hgx-b200", "b200", 8, 1},
      {"hgx-b200:2", "b200", 16, 2},
      {"gb200-nvl72", "gb200", 72, 18},
      {"gb200-nvl72:2", "gb200", 144, 36},
      {"h20:2", "h20", 16, 2},
      {"mi300x", "mi300x", 8, 1},
      {"mi300x:3", "mi300x", 24, 3},
      {"mi325x:2", "mi325x", 16, 2},
      {"mi355x:2", "mi355x", 16, 2},
      {"l40s:2", "l40s", 16, 2},
      {"hgx-b200:3:fat-tree", "b200", 24, 3},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const Topology t = Topology::preset(c.name);
    REQUIRE(t.name == c.name);
    REQUIRE(t.devices().size() == static_cast<std::size_t>(c.gpus));
    REQUIRE(t.num_hosts() == c.hosts);
    for (int d : t.devices()) REQUIRE(t.nodes()[d].device == c.device);
    const int per_host = c.gpus / c.hosts;
    for (int r = 0; r < c.gpus; ++r)  // ranks are host-major: node<h>/gpu<i>
      REQUIRE(t.nodes()[t.devices()[r]].name ==
              "node" + std::to_string(r / per_host) + "/gpu" + std::to_string(r % per_host));
    require_host_order(t);
    REQUIRE(!t.describe().empty());
  }
}

TEST_CASE("HGX B200 and H20: NVSwitch inside a machine, rail IB across", "[sim]") {
  const Topology b = Topology::preset("hgx-b200:2");
  REQUIRE(hops(b, "node0/gpu0", "node0/gpu5") ==
          std::vector<std::string>{"node0/gpu0", "node0/nvswitch", "node0/gpu5"});
  REQUIRE(bw(b, "node0/gpu0", "node0/gpu5") == 900e9);
  REQUIRE(latency(b, "node0/gpu0", "node0/gpu5") == kNvlinkHop);
  REQUIRE(hops(b, "node0/gpu3", "node1/gpu3")[3] == "leaf3");
  REQUIRE(bw(b, "node0/gpu3", "node1/gpu3") == 50e9);  // ConnectX-7 NDR
  REQUIRE(latency(b, "node0/gpu3", "node1/gpu3") == kAcrossHosts);
  REQUIRE(link_kinds(b, "node0/gpu3", "node1/gpu3") == std::set<std::string>{"pcie", "ib"});
  const Topology h = Topology::preset("h20:2");
  REQUIRE(bw(h, "node1/gpu2", "node1/gpu7") == 450e9);  // NVLink 900 GB/s bidirectional
  REQUIRE(bw(h, "node0/gpu7", "node1/gpu7") == 50e9);
}

TEST_CASE("GB200 NVL72: the 72 GPUs of a rack meet in its NVLink Switch, racks over IB", "[sim]") {
  const Topology t = Topology::preset("gb200-nvl72:2");
  // Different compute trays (hosts) of rack 0: NVLink through the rack's switch, not IB.
  REQUIRE(hops(t, "node0/gpu0", "node17/gpu3") ==
          std::vector<std::string>{"node0/gpu0", "rack0/nvswitch", "node17/gpu3"});
  REQUIRE(link_kinds(t, "node0/gpu0", "node17/gpu3") == std::set<std::string>{"nvlink"});
  REQUIRE(bw(t, "node0/gpu0", "node17/gpu3") == 900e9);
  REQUIRE(latency(t, "node0/gpu0", "node17/gpu3") == kNvlinkHop);
  REQUIRE(hops(t, "node18/gpu1", "node35/gpu2")[1] == "rack1/nvswitch");
  // Racks 0 and 1: each GPU's own ConnectX-7, rail by GPU index within the tray.
  REQUIRE(hops(t, "node17/gpu1", "node18/gpu1")[3] == "leaf1");
  REQUIRE(link_kinds(t, "node17/gpu1", "node18/gpu1") == std::set<std::string>{"pcie", "ib"});
  REQUIRE(bw(t, "node17/gpu1", "node18/gpu1") == 50e9);
  REQUIRE(latency(t, "node17/gpu1", "node18/gpu1") == kAcrossHosts);
  REQUIRE(t.find_node("leaf4") == -1);  // four rails: four NICs per tray
  REQUIRE(Topology::preset("gb200-nvl72").find_node("spine") == -1);  // one rack: no IB
}

TEST_CASE("MI300X, MI325X, MI355X: a direct Infinity Fabric link per GPU pair", "[sim]") {
  const Topology t = Topology::preset("mi300x:2");
  REQUIRE(hops(t, "node0/gpu0", "node0/gpu7") ==
          std::vector<std::string>{"node0/gpu0", "node0/gpu7"});
  REQUIRE(link_kinds(t, "node0/gpu0", "node0/gpu7") == std::set<std::string>{"xgmi"});
  REQUIRE(bw(t, "node0/gpu0", "node0/gpu7") == 64e9);
  REQUIRE(latency(t, "node0/gpu0", "node0/gpu7") == kNvlinkHop);
  int xgmi = 0;
  for (const Link& l : t.links()) xgmi += l.kind == "xgmi";
  REQUIRE(xgmi == 2 * 28);                             // 8 GPUs, 7 links each
  REQUIRE(bw(t, "node0/gpu4", "node1/gpu4") == 50e9);  // 400G NIC per GPU
  REQUIRE(link_kinds(t, "node0/gpu4", "node1/gpu4") == std::set<std::string>{"pcie", "ib"});
  const Topology m325 = Topology::preset("mi325x:2");
  REQUIRE(bw(m325, "node1/gpu1", "node1/gpu2") == 64e9);
  const Topology m355 = Topology::preset("mi355x:2");
  REQUIRE(bw(m355, "node1/gpu1", "node1/gpu2") == 76.8e9);
  REQUIRE(bw(m355, "node0/gpu1", "node1/gpu1") == 50e9);
}

TEST_CASE("L40S: PCIe Gen4 only, a 200 Gb/s NIC per GPU", "[sim]") {
  const Topology t = Topology::preset("l40s:2");
  REQUIRE(hops(t, "node0/gpu0", "node0/gpu5") ==
          std::vector<std::string>{"node0/gpu0", "node0/pcie0", "node0/host", "node0/pcie5",
                                   "node0/gpu5"});
  REQUIRE(bw(t, "node0/gpu0", "node0/gpu5") == 25e9);
  REQUIRE(bw(t, "node0/gpu2", "node1/gpu2") == 25e9);
  for (const Link& l : t.links()) REQUIRE((l.kind == "pcie" || l.kind == "ib"));
}

TEST_CASE("families joined in one job: hosts in order, one IB network, each its own NIC", "[sim]") {
  const Topology t = Topology::preset("dgx-a100:2+dgx-h100:2");
  REQUIRE(t.devices().size() == 32);
  REQUIRE(t.num_hosts() == 4);
  for (int r = 0; r < 32; ++r) {
    const Node& n = t.nodes()[t.devices()[r]];
    REQUIRE(n.host == r / 8);
    REQUIRE(n.device == (r < 16 ? "a100-80gb" : "h100-sxm"));
  }
  REQUIRE(t.nodes()[t.devices()[16]].name == "node2/gpu0");
  require_host_order(t);
  REQUIRE(bw(t, "node0/gpu1", "node1/gpu6") == 25e9);  // A100 hosts: HDR
  REQUIRE(bw(t, "node2/gpu6", "node3/gpu6") == 50e9);  // H100 hosts: NDR
  REQUIRE(bw(t, "node1/gpu6", "node2/gpu6") == 25e9);
  REQUIRE(bw(t, "node2/gpu0", "node2/gpu7") == 450e9);
  REQUIRE(hops(t, "node1/gpu6", "node2/gpu6")[3] == "leaf6");
  // leaf 6 carries two HDR and two NDR NICs up to the spine.
  for (const Link& l : t.links())
    if (t.nodes()[l.a].name == "leaf6" && t.nodes()[l.b].name == "spine")
      REQUIRE(l.bw_bytes_per_s == 2 * 25e9 + 2 * 50e9);
  // Mixed with a rack: its NVLink Switch stays a cluster node, after every host.
  const Topology mixed = Topology::preset("hgx-b200:1+gb200-nvl72:1");
  REQUIRE(mixed.devices().size() == 80);
  require_host_order(mixed);
  REQUIRE(bw(mixed, "node1/gpu0", "node18/gpu3") == 900e9);
  REQUIRE(bw(mixed, "node0/gpu0", "node1/gpu0") == 50e9);
}

TEST_CASE("16,384 GPUs build, and counts past the limits are refused naming them", "[sim]") {
  const auto start = std::chrono::steady_clock::now();
  const Topology rack = Topology::preset("gb200-nvl72:228");
  REQUIRE(rack.devices().size() == 228 * 72);
  REQUIRE(rack.num_hosts() == 228 * 18);
  REQUIRE(Topology::preset("dgx-h100:2048").devices().size() == 16384);
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
  REQUIRE(lacks(error_of([] { Topology::preset("dgx-h100:4097"); }), {"node count", "4096"}) == "");
  REQUIRE(lacks(error_of([] { Topology::preset("gb200-nvl72:456"); }),
                {"32832 GPUs", "at most 32768"}) == "");
  REQUIRE(lacks(error_of([] { Topology::preset("mi300x:0"); }), {"node count"}) == "");
  REQUIRE(lacks(error_of([] { Topology::preset("mi300x:2:torus"); }), {"torus", "fat-tree"}) == "");
  for (const char* bad : {"dgx-a100:2+dgx-h100", "dgx-a100:2+tpu:2", "hgx-b200:2:rail:1", "a100:2",
                          "dgx-a100:2+dgx-h100:2:fat-tree"})
    REQUIRE(lacks(error_of([&] { Topology::preset(bad); }),
                  {"unknown topology preset", "gb200-nvl72:N", "mi300x:N", "l40s:N",
                   "FAMILY:N+FAMILY:M"}) == "");
}

TEST_CASE("in a mixed job each rank computes on its own host's device", "[sim]") {
  nn::TrainOptions o = simtest::small_run("convnext");
  o.input = {3, 64, 512};
  const core::DeviceMesh mesh({2, 8}, {"dp", "sp"});  // dp 0 on the A100 host, dp 1 on the H100
  const Topology topo = Topology::preset("dgx-a100:1+dgx-h100:1");
  const SimResult r = simulate_iteration(replay_all(o, mesh), topo, DeviceCatalog{});
  REQUIRE(r.devices.size() == 16);
  for (int i = 0; i < 8; ++i) {
    const DeviceResult &a100 = r.devices[i], &h100 = r.devices[i + 8];
    REQUIRE(a100.device == "a100-80gb");
    REQUIRE(h100.device == "h100-sxm");
    REQUIRE(h100.compute_busy_ps < a100.compute_busy_ps);  // the same shard, a faster device
  }
}
