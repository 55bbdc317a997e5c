// Routing through host symmetry gives the routes of one shortest-path search per source: on the
// cluster presets, on random clusters, and on topologies whose form the symmetry refuses.
#include "random_cluster.hpp"
#include "sim_test_util.hpp"

using namespace tessera;
using namespace tessera::sim;

namespace {

/// Every ordered pair of compute nodes, and some pairs with a switch at one end, routed both
/// ways. Returns the number of pairs compared.
int compare_all_routes(const Topology& fast, const std::string& what) {
  Topology exact = fast;
  exact.set_symmetric_routing(false);
  REQUIRE(fast.symmetric_routing());
  REQUIRE_FALSE(exact.symmetric_routing());
  const std::vector<int> dev = fast.devices();
  int compared = 0;
  for (int a : dev)
    for (int b : dev) {
      INFO(what << ": " << fast.nodes()[a].name << " → " << fast.nodes()[b].name);
      REQUIRE(fast.route(a, b) == exact.route(a, b));
      ++compared;
    }
  const int last = static_cast<int>(fast.nodes().size()) - 1;  // a cluster switch
  for (int a : dev) {
    INFO(what << ": " << fast.nodes()[a].name << " ↔ " << fast.nodes()[last].name);
    REQUIRE(fast.route(a, last) == exact.route(a, last));
    REQUIRE(fast.route(last, a) == exact.route(last, a));
  }
  return compared;
}

}  // namespace

TEST_CASE("symmetric routing equals the search from every source on the presets", "[sim]") {
  for (const char* name : {"dgx-a100:5", "dgx-a100:5:fat-tree", "dgx-h100:9:fat-tree", "hgx-h200:3",
                           "dgx-a100", "cpu-host:4"}) {
    const Topology t = Topology::preset(name);
    REQUIRE(compare_all_routes(t, name) ==
            static_cast<int>(t.devices().size() * t.devices().size()));
  }
}

TEST_CASE("symmetric routing equals the search from every source on random clusters", "[sim]") {
  for (unsigned seed = 1; seed <= 12; ++seed) {
    const simtest::RandomCluster c = simtest::random_cluster(seed, 2 + static_cast<int>(seed % 5));
    compare_all_routes(c.topology, c.description);
  }
}

TEST_CASE("symmetric routing steps aside where the topology lacks its form", "[sim]") {
  // Hosts joined directly (no switch between them), a host's nodes interleaved with another's,
  // and a switch listed before the hosts: each routed by its own search, with the same routes.
  Topology direct;
  for (int h = 0; h < 3; ++h)
    for (int g = 0; g < 2; ++g)
      direct.add_node(
          {"node" + std::to_string(h) + "/gpu" + std::to_string(g), NodeKind::Gpu, "a100-80gb", h});
  const int sw0 = direct.add_node({"sw0", NodeKind::NvSwitch, "", 0});
  direct.add_link(0, sw0, 100e9, 300'000, "nvlink");
  direct.add_link(1, sw0, 100e9, 300'000, "nvlink");
  const int sw1 = direct.add_node({"sw1", NodeKind::NetSwitch, "", -1});
  for (int v = 2; v < 6; ++v) direct.add_link(v, sw1, 25e9, 600'000, "ib");
  direct.add_link(sw0, sw1, 25e9, 600'000, "ib");
  compare_all_routes(direct, "a switch of host 0 after the cluster switch");

  Topology interleaved;
  const int s = interleaved.add_node({"spine", NodeKind::NetSwitch, "", -1});
  for (int i = 0; i < 4; ++i) {
    const int g =
        interleaved.add_node({"gpu" + std::to_string(i), NodeKind::Gpu, "a100-80gb", i % 2});
    interleaved.add_link(g, s, 25e9, 600'000, "ib");
  }
  compare_all_routes(interleaved, "interleaved hosts, switch first");
}
