// The simulator's hierarchical all-reduce against the runtime's (comm::MeshComm): the same phases,
// groups and bytes per rank on 2 hosts × 2 ranks, and Auto's size limit against the simulator's
// own choice on multi-node presets.
#include <map>
#include <tuple>

#include "sim_test_util.hpp"
#include "support/test_utils.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/core/tracing.hpp"
#include "tessera/sim/collectives.hpp"
#include "tessera/sim/fold.hpp"
#include "tessera/sim/replay.hpp"

using namespace tessera;
using namespace tessera::sim;

namespace {

/// Two hosts of two GPUs, host-major (group rank r on host r / 2): a switch per host, one rail
/// switch per local index.
Topology two_by_two() {
  Topology t;
  t.name = "2x2";
  const int rails[] = {t.add_node({"rail0", NodeKind::NetSwitch, "", -1}),
                       t.add_node({"rail1", NodeKind::NetSwitch, "", -1})};
  for (int h = 0; h < 2; ++h) {
    const int sw = t.add_node({"h" + std::to_string(h) + "/sw", NodeKind::NvSwitch, "", h});
    for (int j = 0; j < 2; ++j) {
      const int g = t.add_node({"h" + std::to_string(h) + "/gpu" + std::to_string(j), NodeKind::Gpu, "h100-sxm", h});
      t.add_link(g, sw, 100e9, 300'000, "nvlink");
      t.add_link(g, rails[j], 25e9, 1'500'000, "ib");
    }
  }
  return t;
}

/// Bytes a rank sends in a ring collective of a `bytes` buffer (TracingComm's convention) over p
/// ranks: reduce_scatter and all_gather (p−1)·bytes/p, all_reduce 2(p−1)·bytes/p.
std::int64_t ring_bytes_sent(const std::string& op, std::int64_t bytes, int p) {
  return (op == "all_reduce" ? 2 : 1) * (p - 1) * bytes / p;
}

}  // namespace

TEST_CASE("runtime hierarchical all-reduce moves the simulated plan's bytes per rank", "[sim][hier]") {
  // 4096 f32 (16 KiB), divisible by the 4 ranks: the runtime's element padding and the plan's
  // byte rounding agree (for other counts the plan rounds bytes, the runtime whole elements).
  const std::int64_t count = 4096, bytes = count * 4;
  const core::DeviceMesh mesh({2, 2}, {"node", "sp"});
  core::TraceRecorder rec;
  comm::local::run(4, [&](comm::Backend& world) {
    core::TracingComm traced(world, core::TraceTarget{&rec, world.rank(), mesh.coords_of(world.rank())});
    comm::MeshComm mc(mesh, traced, {.all_reduce = comm::AllReduceAlgorithm::Hierarchical});
    core::Tensor t = test::random_tensor({count}, core::DType::F32, 7 + world.rank());
    mc.all_reduce(t, {0, 1});
  });

  const Topology topo = two_by_two();
  const CollectivePlan plan =
      plan_collective(topo, CollectiveOp::AllReduce, Algorithm::Hierarchical, topo.devices(), bytes);
  REQUIRE(plan.steps.size() == 3);  // intra reduce-scatter, rail all-reduce, intra all-gather
  const int L = 2, H = 2;
  const std::vector<int> phase_size{L, H, L};                // runtime group of each phase
  const std::vector<std::vector<int>> phase_dims{{1}, {0}, {1}};  // its mesh dimensions
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    std::vector<const core::TraceEvent*> phases;
    for (const auto& e : rec.events())
      if (e.pid == r && e.cat == "comm") phases.push_back(&e);
    REQUIRE(phases.size() == 3);
    REQUIRE(phases[0]->op == "reduce_scatter");
    REQUIRE(phases[1]->op == "all_reduce");
    REQUIRE(phases[2]->op == "all_gather");
    for (int k = 0; k < 3; ++k) {
      INFO("phase " << k << " " << phases[k]->op);
      const CollectiveStep& step = plan.steps[k];
      // Bytes: the plan's per-rank sends (repeat × this rank's transfers) against the ring
      // volume of the runtime's traced buffer over its group.
      std::int64_t sim_sent = 0;
      std::vector<int> peers;
      for (const Transfer& tr : step.transfers)
        if (tr.from == r) {
          sim_sent += tr.bytes * step.repeat;
          peers.push_back(tr.to);
        }
      REQUIRE(ring_bytes_sent(phases[k]->op, phases[k]->bytes, phase_size[k]) == sim_sent);
      // Groups: the plan's peers (group rank = world rank here) are the runtime group's others.
      std::vector<int> others;
      for (int q : mesh.group_ranks(phase_dims[k], r))
        if (q != r) others.push_back(q);
      REQUIRE(peers == others);
    }
  }
}

TEST_CASE("Auto's hierarchical size limit agrees with the simulator's choice", "[sim][hier]") {
  // The simulator's auto picks the fastest of ring, tree and hier; the runtime's Auto picks
  // hierarchical up to kHierarchicalMaxBytes. On these presets (8 GPUs per node, rail-optimised)
  // the two agree at every size checked: hier below the limit, the flat ring above it.
  constexpr std::int64_t kKiB = 1024;
  for (const char* preset : {"dgx-a100:2", "dgx-h100:2", "dgx-a100:4"}) {
    const Topology t = Topology::preset(preset);
    const int nodes = preset[9] - '0';
    for (std::int64_t kib : {64, 1024, 16 * 1024, 32 * 1024, 64 * 1024, 128 * 1024}) {
      const std::int64_t bytes = kib * kKiB;
      INFO(preset << " " << bytes << " bytes");
      const auto sim = simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Auto, t.devices(), bytes);
      comm::AllReduceShape s{.nodes = nodes, .ranks_per_node = 8, .bytes = std::size_t(bytes),
                             .multi_process = true, .host_buffer = true};
      const bool runtime_hier =
          comm::choose_all_reduce_algorithm(comm::AllReduceAlgorithm::Auto, s) == comm::AllReduceAlgorithm::Hierarchical;
      INFO("simulator chose " << algorithm_name(sim.algorithm));
      REQUIRE((sim.algorithm == Algorithm::Hierarchical) == runtime_hier);
    }
  }
}

namespace {

// The gradient collectives of a replayed step (layer "grad_bucket"), as (name, group size, bytes).
std::vector<std::tuple<std::string, int, std::int64_t>> bucket_collectives(const RankReplay& r) {
  std::vector<std::tuple<std::string, int, std::int64_t>> out;
  for (const ProgramOp& op : r.program)
    if (op.kind == ProgramOp::Kind::Collective && op.layer == "grad_bucket")
      out.emplace_back(op.name, static_cast<int>(op.group.size()), op.bytes);
  return out;
}

}  // namespace

TEST_CASE("the replay runs the gradient all-reduce as the run's MeshComm options say", "[sim][hier]") {
  // dp=2,sp=2 with node_dim dp (two hosts of two ranks): flat, each bucket is one all_reduce of
  // the 4 ranks; hierarchical, the runtime's three phases on their groups with the shard's bytes.
  const nn::TrainOptions o = simtest::small_run("convnext");
  const core::DeviceMesh mesh = core::DeviceMesh::parse("dp=2,sp=2");
  const comm::MeshCommOptions flat{.all_reduce = comm::AllReduceAlgorithm::Flat, .node_dim = "dp"};
  const comm::MeshCommOptions hier{.all_reduce = comm::AllReduceAlgorithm::Hierarchical, .node_dim = "dp"};
  for (int r = 0; r < mesh.size(); ++r) {
    INFO("rank " << r);
    const auto f = bucket_collectives(replay_rank(o, mesh, r, flat));
    const RankReplay hr = replay_rank(o, mesh, r, hier);
    const auto h = bucket_collectives(hr);
    REQUIRE(!f.empty());
    std::size_t k = 0, spanning = 0;  // k: next collective of the hierarchical replay
    for (std::size_t b = 0; b < f.size(); ++b) {
      INFO("bucket " << b);
      const auto [name, size, bytes] = f[b];
      REQUIRE(name == "all_reduce");
      REQUIRE(k < h.size());
      if (size == 2) {  // reduced over dp alone (the head behind the global pool): one rank per node
        REQUIRE(h[k++] == f[b]);
        continue;
      }
      REQUIRE(size == 4);
      ++spanning;
      // reduce_scatter inside the node (sp pair) of the whole bucket, all_reduce of this rank's
      // half across the nodes (dp pair), all_gather inside the node. An odd count is padded to
      // two equal shards (hierarchical_all_reduce's workspace).
      const std::int64_t shard = (bytes / 4 + 1) / 2 * 4;
      REQUIRE(k + 3 <= h.size());
      REQUIRE(h[k] == std::tuple{std::string("reduce_scatter"), 2, 2 * shard});
      REQUIRE(h[k + 1] == std::tuple{std::string("all_reduce"), 2, shard});
      REQUIRE(h[k + 2] == std::tuple{std::string("all_gather"), 2, 2 * shard});
      k += 3;
    }
    REQUIRE(k == h.size());
    REQUIRE(spanning > 0);
    // The phases' groups: the sp pair of this rank, then its dp pair.
    std::vector<std::vector<int>> groups;  // of the first reduce_scatter and the all_reduce after it
    for (const ProgramOp& op : hr.program)
      if (op.kind == ProgramOp::Kind::Collective && op.layer == "grad_bucket" && groups.size() < 2 &&
          (op.name == "reduce_scatter" || !groups.empty()))
        groups.push_back(op.group);
    REQUIRE(groups.size() == 2);
    REQUIRE(groups[0] == mesh.group_ranks({1}, r));
    REQUIRE(groups[1] == mesh.group_ranks({0}, r));
  }
  // Folding renames the phases' groups as replaying every rank gives them.
  const FoldedReplay folded = replay_folded(o, mesh, hier);
  for (int r = 0; r < mesh.size(); ++r) REQUIRE(replay_difference(folded.replay_for(r), replay_rank(o, mesh, r, hier)) == "");
  // A node_dim the mesh lacks is refused as the runtime refuses it.
  const comm::MeshCommOptions bad{.all_reduce = comm::AllReduceAlgorithm::Hierarchical, .node_dim = "node"};
  REQUIRE_THAT(simtest::error_of([&] { replay_rank(o, mesh, 0, bad); }), Catch::Matchers::Contains("node_dim 'node'"));
}
