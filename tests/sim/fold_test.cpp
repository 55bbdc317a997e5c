// Symmetric-rank folding: a folded replay renames a representative's program into exactly the
// program replay_rank gives for every rank (dp replicas, interior and border spatial shards,
// multi-hop halos, 2-D tiles, uneven batches, SyncBN), and the folded engine gives the same
// iteration time, per-device timelines, memory, link bytes and collectives as simulating every
// rank.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "sim_test_util.hpp"
#include "support/catch.hpp"
#include "tessera/sim/fold.hpp"

using namespace tessera;

namespace {

nn::TrainOptions small(const std::string& family, core::Shape input, int batch,
                       const std::string& shard = "W", const std::string& checkpointing = "none") {
  nn::TrainOptions o = simtest::small_run(family);
  o.input = std::move(input);
  o.batch = batch;
  o.shard = shard;
  o.checkpointing = checkpointing;
  return o;
}

/// (from, to, kind) → (bytes, utilisation) of every link that carried data.
std::map<std::tuple<std::string, std::string, std::string>, std::pair<double, double>> link_table(
    const sim::SimResult& r) {
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<double, double>> t;
  for (const sim::LinkUse& l : r.links) {
    const bool fresh =
        t.emplace(std::make_tuple(l.from, l.to, l.kind), std::make_pair(l.bytes, l.utilisation))
            .second;
    REQUIRE(fresh);
  }
  return t;
}

/// Every collective as (name, layer, algorithm, group, bytes, start, end, links), sorted.
std::vector<std::string> collective_table(const sim::SimResult& r) {
  std::vector<std::string> t;
  for (const sim::CollectiveUse& c : r.collectives) {
    std::ostringstream os;
    os.precision(17);
    os << c.name << " " << c.layer << " " << c.algorithm << " [";
    for (int m : c.ranks) os << m << ",";
    os << "] " << c.bytes << " " << c.start_ps << "-" << c.end_ps;
    for (const sim::CollectiveLinkBytes& l : c.links)
      os << " " << l.from << ">" << l.to << ":" << l.kind << "=" << l.bytes;
    t.push_back(os.str());
  }
  std::sort(t.begin(), t.end());
  return t;
}

struct Case {
  const char* what;
  nn::TrainOptions options;
  const char* mesh;
  int max_classes;  ///< the folding must find at most this many classes
};

std::vector<Case> cases() {
  return {
      {"dp=4 x sp=8, interior shards fold", small("convnext", {3, 64, 1024}, 8), "dp=4,sp=8", 5},
      {"sp=16 with one-pixel shards (multi-hop halos)", small("convnext", {3, 64, 512}, 2), "sp=16",
       9},
      {"2-D tiles with dp", small("convnext", {3, 128, 256}, 4), "dp=2,sp_h=2,sp_w=4", 8},
      {"uneven batch over dp", small("convnext", {3, 64, 512}, 5, "W", "block"), "dp=3,sp=4", 8},
      {"shard H", small("convnext", {3, 512, 64}, 2, "H"), "dp=2,sp=8", 7},
      {"RegNetY with SyncBN", small("regnet", {3, 64, 512}, 4), "dp=2,sp=4", 4},
  };
}

}  // namespace

TEST_CASE("a folded replay renames into every rank's own replay", "[sim][fold]") {
  for (const Case& c : cases()) {
    INFO(c.what);
    const core::DeviceMesh mesh = core::DeviceMesh::parse(c.mesh);
    const sim::FoldedReplay f = sim::replay_folded(c.options, mesh);
    const std::vector<sim::RankReplay> all = sim::replay_all(c.options, mesh);
    std::printf("fold: %-46s %-20s %2zu classes for %2d ranks\n", c.what, c.mesh, f.classes.size(),
                mesh.size());
    REQUIRE(f.num_ranks() == mesh.size());
    REQUIRE(static_cast<int>(f.classes.size()) <= c.max_classes);
    int total = 0;
    for (int m : f.multiplicity()) total += m;
    REQUIRE(total == mesh.size());
    for (int r = 0; r < mesh.size(); ++r)
      REQUIRE(sim::replay_difference(f.replay_for(r), all[r]) == "");
  }
}

TEST_CASE("replay_difference names the first differing op", "[sim][fold]") {
  const nn::TrainOptions o = small("convnext", {3, 64, 512}, 2);
  const core::DeviceMesh mesh = core::DeviceMesh::parse("sp=4");
  sim::RankReplay a = sim::replay_rank(o, mesh, 1);
  REQUIRE(sim::replay_difference(a, a) == "");
  sim::RankReplay b = a;
  for (sim::ProgramOp& op : b.program)
    if (op.kind == sim::ProgramOp::Kind::P2P) {
      op.transfers.at(0).peer = 3;
      break;
    }
  REQUIRE(simtest::lacks(sim::replay_difference(a, b), {"rank 1: op ", "batch_p2p"}) == "");
}

TEST_CASE("folded and unfolded simulations agree", "[sim][fold]") {
  struct SimCase {
    nn::TrainOptions options;
    const char* mesh;
    const char* topology;
  };
  const std::vector<SimCase> sims = {
      {small("convnext", {3, 64, 512}, 4), "dp=2,sp=4", "dgx-a100"},
      {small("convnext", {3, 64, 1024}, 8, "W", "block"), "dp=4,sp=4", "dgx-a100:2"},
      {small("convnext", {3, 64, 1024}, 4), "dp=2,sp=8", "dgx-h100:2:fat-tree"},
      {small("regnet", {3, 128, 256}, 4), "dp=2,sp_h=2,sp_w=2", "dgx-a100"},
      // Shard H with squeeze-excitation pools (all-reduces within each replica's sp group).
      {small("regnet", {3, 128, 64}, 4, "H", "block"), "dp=2,sp=2", "cpu-host:4"},
      {small("regnet", {3, 256, 64}, 4, "H"), "dp=2,sp=4", "dgx-a100"},
      {small("convnext", {3, 512, 64}, 4, "H"), "dp=2,sp=8", "dgx-h100:2:fat-tree"},
  };
  const sim::DeviceCatalog cat;
  for (const SimCase& c : sims) {
    INFO(c.mesh << " on " << c.topology);
    const core::DeviceMesh mesh = core::DeviceMesh::parse(c.mesh);
    const sim::Topology topo = sim::Topology::preset(c.topology);
    const sim::FoldedReplay f = sim::replay_folded(c.options, mesh);
    const sim::SimResult full =
        sim::simulate_iteration(sim::replay_all(c.options, mesh), topo, cat);
    const sim::SimResult folded = sim::simulate_iteration(f, topo, cat);
    const sim::SimResult expanded =
        sim::simulate_iteration(f, topo, cat, {}, /*fold_engine=*/false);
    std::printf("fold: %-20s on %-20s %2d of %2zu ranks simulated, %s\n", c.mesh, c.topology,
                folded.simulated_ranks, folded.devices.size(),
                folded.iteration_ps == full.iteration_ps ? "equal" : "DIFFERENT");
    REQUIRE(folded.simulated_ranks < mesh.size());
    REQUIRE(expanded.simulated_ranks == mesh.size());
    REQUIRE(folded.iteration_ps == full.iteration_ps);
    REQUIRE(expanded.iteration_ps == full.iteration_ps);
    REQUIRE(folded.devices.size() == full.devices.size());
    for (std::size_t r = 0; r < full.devices.size(); ++r) {
      const sim::DeviceResult &a = folded.devices[r], &b = full.devices[r];
      REQUIRE(a.rank == b.rank);
      REQUIRE(b.simulated_as == b.rank);
      REQUIRE(a.end_ps == b.end_ps);
      REQUIRE(a.compute_busy_ps == b.compute_busy_ps);
      REQUIRE(a.comm_busy_ps == b.comm_busy_ps);
      REQUIRE(a.memory.peak_total == b.memory.peak_total);
      REQUIRE(a.memory.peak == b.memory.peak);
    }
    // Every link carries the same bytes (the mirrored ranks' halos and collectives included), so
    // its utilisation is the same too; and the same collectives run over the same links.
    REQUIRE(link_table(folded) == link_table(full));
    REQUIRE(link_table(expanded) == link_table(full));
    REQUIRE(collective_table(folded) == collective_table(full));
    REQUIRE(collective_table(expanded) == collective_table(full));
  }
}
