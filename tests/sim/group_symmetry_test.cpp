// The fast engine's group symmetry: the data-parallel groups of a cluster's rails map onto each
// other by an automorphism that renames their links; groups no symmetry relates are refused.
#include "group_symmetry.hpp"
#include "random_cluster.hpp"
#include "sim_test_util.hpp"
#include "tessera/sim/collectives.hpp"

using namespace tessera;
using namespace tessera::sim;

namespace {

/// GPU `local` of every host: one rail's data-parallel group.
std::vector<int> rail(const Topology& t, int local, int per_host) {
  std::vector<int> g;
  const std::vector<int> dev = t.devices();
  for (std::size_t i = local; i < dev.size(); i += per_host) g.push_back(dev[i]);
  return g;
}

}  // namespace

TEST_CASE("rails map onto each other and their collectives' link bytes rename", "[sim]") {
  for (const char* name : {"dgx-a100:4", "dgx-h100:6:fat-tree", "hgx-h200:3"}) {
    INFO(name);
    const Topology t = Topology::preset(name);
    const detail_engine::GroupSymmetry sym(t);
    const std::vector<int> g0 = rail(t, 0, 8);
    for (int local : {1, 5, 7}) {
      const std::vector<int> g = rail(t, local, 8);
      const std::optional<std::vector<int>> edges = sym.edge_map(g0, g);
      REQUIRE(edges.has_value());
      for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather}) {
        const CollectiveResult a = simulate_collective(t, op, Algorithm::Auto, g0, 1 << 20);
        const CollectiveResult b = simulate_collective(t, op, Algorithm::Auto, g, 1 << 20);
        REQUIRE(a.time_ps == b.time_ps);
        REQUIRE(a.algorithm == b.algorithm);
        std::vector<double> renamed(a.edge_bytes.size(), 0.0);
        for (std::size_t e = 0; e < renamed.size(); ++e) renamed[(*edges)[e]] = a.edge_bytes[e];
        REQUIRE(renamed == b.edge_bytes);
      }
    }
  }
}

TEST_CASE("groups that no symmetry relates are refused", "[sim]") {
  const Topology t = Topology::preset("dgx-a100:4");
  const detail_engine::GroupSymmetry sym(t);
  const std::vector<int> dev = t.devices();
  // Two GPUs of one host against two of different hosts; sizes that differ; a member twice.
  REQUIRE_FALSE(sym.edge_map({dev[0], dev[1]}, {dev[0], dev[8]}).has_value());
  REQUIRE_FALSE(sym.edge_map({dev[0], dev[1]}, {dev[0]}).has_value());
  REQUIRE_FALSE(sym.edge_map({dev[0], dev[8]}, {dev[1], dev[1]}).has_value());
  // A cluster whose second host has slower NVLink: its GPUs are not the first host's.
  Topology uneven;
  const int spine = -1;
  (void)spine;
  for (int h = 0; h < 2; ++h) {
    const std::string p = "node" + std::to_string(h) + "/";
    const int sw = uneven.add_node({p + "nvswitch", NodeKind::NvSwitch, "", h});
    for (int g = 0; g < 2; ++g) {
      const int gpu =
          uneven.add_node({p + "gpu" + std::to_string(g), NodeKind::Gpu, "a100-80gb", h});
      uneven.add_link(gpu, sw, h == 0 ? 300e9 : 150e9, 300'000, "nvlink");
    }
  }
  const detail_engine::GroupSymmetry usym(uneven);
  const std::vector<int> ud = uneven.devices();
  REQUIRE_FALSE(usym.edge_map({ud[0], ud[1]}, {ud[2], ud[3]}).has_value());
  REQUIRE(usym.edge_map({ud[0], ud[1]}, {ud[1], ud[0]}).has_value());  // a swap within the host
}
