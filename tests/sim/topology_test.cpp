// Topology: presets and their routes (NVSwitch inside a DGX, the rail IB across nodes), routing
// rules (latency then hops, no relaying via GPUs, deterministic ties), the calibration hook.
#include "sim_test_util.hpp"

using namespace tessera;
using namespace tessera::sim;
using tessera::simtest::error_of;
using tessera::simtest::lacks;

namespace {

/// The node names along route(src, dst), source first.
std::vector<std::string> hops(const Topology& t, const std::string& src, const std::string& dst) {
  std::vector<std::string> names{src};
  for (int e : t.route(t.find_node(src), t.find_node(dst)))
    names.push_back(t.nodes()[t.edge(e).to].name);
  return names;
}

}  // namespace

TEST_CASE("presets have the documented devices and hosts", "[sim]") {
  const Topology a100 = Topology::preset("dgx-a100");
  REQUIRE(a100.devices().size() == 8);
  REQUIRE(a100.num_hosts() == 1);
  REQUIRE(a100.nodes()[a100.devices()[0]].device == "a100-80gb");
  REQUIRE(Topology::preset("dgx-h100").nodes()[0].name == "node0/nvswitch");
  REQUIRE(Topology::preset("hgx-h200").nodes()[Topology::preset("hgx-h200").devices()[7]].device ==
          "h200");
  REQUIRE(Topology::preset("rtx4090x4").devices().size() == 4);
  REQUIRE(Topology::preset("cpu-host").devices().size() == 1);
  REQUIRE(Topology::preset("cpu-host:4").devices().size() == 4);

  const Topology cluster = Topology::preset("dgx-h100:4");
  REQUIRE(cluster.devices().size() == 32);
  REQUIRE(cluster.num_hosts() == 4);
  REQUIRE(cluster.name == "dgx-h100:4");
  REQUIRE(cluster.nodes()[cluster.devices()[9]].name == "node1/gpu1");  // ranks are node-major
  REQUIRE(Topology::preset("dgx-a100:3:fat-tree").devices().size() == 24);
  for (const auto& name : Topology::preset_names())
    if (name.find('N') == std::string::npos) REQUIRE(!Topology::preset(name).describe().empty());
}

TEST_CASE("GPUs in a DGX talk over the NVSwitch at NVLink speed", "[sim]") {
  const Topology t = Topology::preset("dgx-a100");
  REQUIRE(hops(t, "node0/gpu0", "node0/gpu5") ==
          std::vector<std::string>{"node0/gpu0", "node0/nvswitch", "node0/gpu5"});
  REQUIRE(t.route_bw(t.find_node("node0/gpu0"), t.find_node("node0/gpu5")) == 300e9);
  REQUIRE(t.route_latency(t.find_node("node0/gpu0"), t.find_node("node0/gpu5")) == 600'000);
  const Topology h = Topology::preset("dgx-h100");
  REQUIRE(h.route_bw(h.find_node("node0/gpu1"), h.find_node("node0/gpu2")) == 450e9);
  REQUIRE(t.route(3, 3).empty());
}

TEST_CASE("across nodes, GPU i reaches GPU i over rail i", "[sim]") {
  const Topology t = Topology::preset("dgx-a100:2");
  REQUIRE(hops(t, "node0/gpu3", "node1/gpu3") ==
          std::vector<std::string>{"node0/gpu3", "node0/pcie3", "node0/nic3", "leaf3", "node1/nic3",
                                   "node1/pcie3", "node1/gpu3"});
  REQUIRE(t.route_bw(t.find_node("node0/gpu3"), t.find_node("node1/gpu3")) == 25e9);
  for (int e : t.route(t.find_node("node0/gpu3"), t.find_node("node1/gpu3")))
    REQUIRE((t.links()[t.edge(e).link].kind == "pcie" || t.links()[t.edge(e).link].kind == "ib"));
  // Different rails meet in the spine.
  const auto cross = hops(t, "node0/gpu1", "node1/gpu6");
  REQUIRE(cross[3] == "leaf1");
  REQUIRE(cross[4] == "spine");
  REQUIRE(cross[5] == "leaf6");
  const Topology h = Topology::preset("hgx-h200:2");
  REQUIRE(h.route_bw(h.find_node("node0/gpu7"), h.find_node("node1/gpu7")) == 50e9);
}

TEST_CASE("fat tree: nodes on one leaf meet there, others in the spine", "[sim]") {
  const Topology t = Topology::preset("dgx-a100:4:fat-tree");  // HDR leaves hold 2 nodes
  REQUIRE(hops(t, "node0/gpu2", "node1/gpu5")[3] == "leaf0");
  REQUIRE(hops(t, "node1/gpu2", "node2/gpu2")[4] == "spine");
  REQUIRE(hops(t, "node2/gpu0", "node3/gpu0")[3] == "leaf1");
}

TEST_CASE("a 4× RTX 4090 workstation has only PCIe through the root complex", "[sim]") {
  const Topology t = Topology::preset("rtx4090x4");
  REQUIRE(hops(t, "node0/gpu0", "node0/gpu3") ==
          std::vector<std::string>{"node0/gpu0", "node0/root", "node0/gpu3"});
  REQUIRE(t.route_bw(t.find_node("node0/gpu0"), t.find_node("node0/gpu3")) == 25e9);
  for (const Link& l : t.links()) REQUIRE(l.kind == "pcie");
}

TEST_CASE("cpu-host takes its shared-memory link from the (calibrated) catalog", "[sim]") {
  const Topology dflt = Topology::preset("cpu-host:2");
  REQUIRE(dflt.route_bw(dflt.devices()[0], dflt.devices()[1]) == 13e9);
  REQUIRE(dflt.route_latency(dflt.devices()[0], dflt.devices()[1]) == 300'000);
  DeviceCatalog calibrated;
  calibrated.add_from_json(R"({"devices":[{"name":"cpu-host","shm_bw_GBps":9.5,"shm_latency_us":0.8}]})");
  const Topology t = Topology::preset("cpu-host:2", calibrated);
  REQUIRE(t.route_bw(t.devices()[0], t.devices()[1]) == 9.5e9);
  REQUIRE(t.route_latency(t.devices()[0], t.devices()[1]) == 800'000);
}

TEST_CASE("routes prefer lower latency, then fewer hops, then smaller vertex ids", "[sim]") {
  Topology t;
  const int a = t.add_node({"a", NodeKind::Gpu, "a100-80gb", 0});
  const int b = t.add_node({"b", NodeKind::Gpu, "a100-80gb", 0});
  const int s1 = t.add_node({"s1", NodeKind::PcieSwitch, "", 0});
  const int s2 = t.add_node({"s2", NodeKind::PcieSwitch, "", 0});
  const int s3 = t.add_node({"s3", NodeKind::PcieSwitch, "", 0});
  const int s4 = t.add_node({"s4", NodeKind::PcieSwitch, "", 0});
  SECTION("latency first: three fast hops beat two slow ones") {
    t.add_link(a, s1, 1e9, 1000, "x");
    t.add_link(s1, b, 1e9, 1000, "x");
    t.add_link(a, s2, 1e9, 100, "x");
    t.add_link(s2, s3, 1e9, 100, "x");
    t.add_link(s3, b, 1e9, 100, "x");
    REQUIRE(hops(t, "a", "b") == std::vector<std::string>{"a", "s2", "s3", "b"});
  }
  SECTION("equal latency: fewer hops") {
    t.add_link(a, s2, 1e9, 100, "x");
    t.add_link(s2, s3, 1e9, 0, "x");
    t.add_link(s3, b, 1e9, 100, "x");
    t.add_link(a, s4, 1e9, 100, "x");
    t.add_link(s4, b, 1e9, 100, "x");
    REQUIRE(hops(t, "a", "b") == std::vector<std::string>{"a", "s4", "b"});
  }
  SECTION("equal paths: the smaller vertex id, whatever the link order") {
    t.add_link(a, s4, 1e9, 100, "x");
    t.add_link(s4, b, 1e9, 100, "x");
    t.add_link(a, s3, 1e9, 100, "x");
    t.add_link(s3, b, 1e9, 100, "x");
    REQUIRE(hops(t, "a", "b") == std::vector<std::string>{"a", "s3", "b"});
    REQUIRE(hops(t, "b", "a") == std::vector<std::string>{"b", "s3", "a"});
    const Topology copy = t;  // a copy routes the same, from its own cache
    REQUIRE(copy.route(a, b) == t.route(a, b));
  }
}

TEST_CASE("routes never relay through a GPU, unreachable pairs name both nodes", "[sim]") {
  Topology t;
  t.name = "line";
  const int g0 = t.add_node({"g0", NodeKind::Gpu, "a100-80gb", 0});
  const int g1 = t.add_node({"g1", NodeKind::Gpu, "a100-80gb", 0});
  const int g2 = t.add_node({"g2", NodeKind::Gpu, "a100-80gb", 0});
  t.add_link(g0, g1, 1e9, 0, "nvlink");
  t.add_link(g1, g2, 1e9, 0, "nvlink");
  REQUIRE(t.route(g0, g1).size() == 1);
  REQUIRE(lacks(error_of([&] { t.route(g0, g2); }), {"no route", "\"g0\"", "\"g2\"", "line"}) == "");
}

TEST_CASE("building a topology refuses bad nodes, links and presets", "[sim]") {
  Topology t;
  t.name = "manual";
  const int g = t.add_node({"g", NodeKind::Gpu, "a100-80gb", 0});
  const int s = t.add_node({"s", NodeKind::NvSwitch, "", 0});
  REQUIRE(lacks(error_of([&] { t.add_node({"g", NodeKind::Gpu, "a100-80gb", 0}); }),
                {"duplicate node name", "\"g\""}) == "");
  REQUIRE(lacks(error_of([&] { t.add_node({"x", NodeKind::Gpu, "", 0}); }), {"without a device"}) == "");
  REQUIRE(lacks(error_of([&] { t.add_node({"y", NodeKind::Nic, "h100-sxm", 0}); }),
                {"only gpu and cpu"}) == "");
  REQUIRE(lacks(error_of([&] { t.add_link(g, s, -1, 0, "x"); }), {"g – s", "bandwidth"}) == "");
  REQUIRE(lacks(error_of([&] { t.add_link(g, g, 1e9, 0, "x"); }), {"itself"}) == "");
  REQUIRE(lacks(error_of([&] { t.add_link(g, 7, 1e9, 0, "x"); }), {"does not exist"}) == "");
  REQUIRE(lacks(error_of([&] { Topology::preset("dgx-b200"); }),
                {"unknown topology preset \"dgx-b200\"", "dgx-a100:N:fat-tree", "rtx4090x4",
                 "hgx-b200:N", "gb200-nvl72:N", "mi355x:N"}) == "");
  REQUIRE(lacks(error_of([&] { Topology::preset("dgx-a100:0"); }), {"node count"}) == "");
  REQUIRE(lacks(error_of([&] { Topology::preset("dgx-a100:2:torus"); }), {"torus", "fat-tree"}) == "");
  t.add_node({"z", NodeKind::Gpu, "tpu-v5e", 0});
  REQUIRE(lacks(error_of([&] { t.check_devices(DeviceCatalog{}); }),
                {"\"z\"", "\"tpu-v5e\"", "a100-40gb"}) == "");
}
