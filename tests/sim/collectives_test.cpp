// Collectives: exact closed forms in integer picoseconds on uncongested synthetic topologies, the
// DGX A100 ring at NVLink speed, Auto, repeats, determinism and refused requests.
#include "sim_test_util.hpp"
#include "tessera/sim/collectives.hpp"

using namespace tessera;
using namespace tessera::sim;
using tessera::simtest::error_of;
using tessera::simtest::lacks;
using tessera::simtest::star;

namespace {

constexpr std::int64_t kMiB = 1 << 20;

/// Two hosts of `local` GPUs: inside a host every GPU is on a switch (bw_in, alpha_in per route);
/// GPU j of each host is also on rail switch j (bw_out, alpha_out per route).
Topology two_hosts(int local, double bw_in, Picos alpha_in, double bw_out, Picos alpha_out) {
  Topology t;
  t.name = "two-hosts";
  std::vector<int> rails;
  for (int j = 0; j < local; ++j)
    rails.push_back(t.add_node({"rail" + std::to_string(j), NodeKind::NetSwitch, "", -1}));
  for (int h = 0; h < 2; ++h) {
    const int sw = t.add_node({"h" + std::to_string(h) + "/sw", NodeKind::NvSwitch, "", h});
    for (int j = 0; j < local; ++j) {
      const int g = t.add_node(
          {"h" + std::to_string(h) + "/gpu" + std::to_string(j), NodeKind::Gpu, "h100-sxm", h});
      t.add_link(g, sw, bw_in, alpha_in / 2, "nvlink");
      t.add_link(g, rails[j], bw_out, alpha_out / 2, "ib");
    }
  }
  return t;
}

}  // namespace

TEST_CASE("uncongested ring all-reduce takes exactly 2(p−1)/p·n/B + 2(p−1)·α", "[sim]") {
  // B = 1 GB/s moves a byte in 1000 ps, so n/p bytes take exactly (n/p)·1000 ps: no rounding.
  // (In general each step's transfer time is rounded up to a whole picosecond.)
  const int p = GENERATE(2, 4, 8);
  const Picos alpha = 1'500'000;  // 1.5 µs per route
  const Topology t = star(p, 1e9, alpha);
  const std::int64_t n = 64 * kMiB;
  const CollectiveResult r = simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Ring, t.devices(), n);
  const Picos expected = 2 * (p - 1) * (n / p) * 1000 + 2 * (p - 1) * alpha;
  REQUIRE(r.time_ps == expected);
  REQUIRE(r.algorithm == Algorithm::Ring);
  const double seconds = double(expected) / 1e12;
  REQUIRE_THAT(r.algbw_GBps, WithinRel(double(n) / seconds / 1e9, 1e-12));
  REQUIRE_THAT(r.busbw_GBps, WithinRel(r.algbw_GBps * 2 * (p - 1) / p, 1e-12));
  REQUIRE(r.busbw_GBps < 1.0);  // never above the 1 GB/s link
  // Every GPU's uplink carried 2(p−1) chunks.
  REQUIRE(r.edge_bytes[t.route(t.devices()[0], t.devices()[1])[0]] == double(2 * (p - 1) * (n / p)));
}

TEST_CASE("ring all-gather, reduce-scatter, pairwise all-to-all and chain broadcast closed forms",
          "[sim]") {
  const int p = 4;
  const Picos alpha = 2'000'000;
  const Topology t = star(p, 1e9, alpha);
  const std::int64_t n = 16 * kMiB;
  const Picos one_step = alpha + (n / p) * 1000;
  REQUIRE(simulate_collective(t, CollectiveOp::AllGather, Algorithm::Auto, t.devices(), n).time_ps ==
          (p - 1) * one_step);
  REQUIRE(simulate_collective(t, CollectiveOp::ReduceScatter, Algorithm::Ring, t.devices(), n).time_ps ==
          (p - 1) * one_step);
  const CollectiveResult a2a = simulate_collective(t, CollectiveOp::AllToAll, Algorithm::Auto, t.devices(), n);
  REQUIRE(a2a.algorithm == Algorithm::Pairwise);
  REQUIRE(a2a.time_ps == (p - 1) * one_step);
  REQUIRE_THAT(a2a.busbw_GBps, WithinRel(a2a.algbw_GBps * (p - 1) / p, 1e-12));

  // Chain broadcast in c chunks: p − 2 + c steps of one chunk each (every link carries one).
  const CollectivePlan plan = plan_collective(t, CollectiveOp::Broadcast, Algorithm::Ring, t.devices(), n);
  int steps = 0;
  for (const auto& s : plan.steps) steps += s.repeat;
  const std::int64_t chunk = plan.steps[0].transfers[0].bytes;
  const int c = static_cast<int>((n + chunk - 1) / chunk);
  REQUIRE(c > 1);
  REQUIRE(steps == p - 2 + c);
  const CollectiveResult bc = simulate_plan(t, plan, t.devices());
  REQUIRE(bc.time_ps == steps * (alpha + chunk * 1000));
  REQUIRE(bc.busbw_GBps == bc.algbw_GBps);
}

TEST_CASE("hierarchical all-reduce on 2 nodes matches its closed form", "[sim]") {
  // T = 2(L−1)·(α_in + (n/L)/B_in) + 2(H−1)·(α_out + (n/(L·H))/B_out), H = 2: reduce-scatter
  // inside each host, all-reduce of each rank's shard across hosts on its rail, all-gather inside.
  const int local = 4;
  const Picos a_in = 600'000, a_out = 3'000'000;
  const double b_in = 100e9, b_out = 25e9;  // 10 ps and 40 ps per byte
  const Topology t = two_hosts(local, b_in, a_in, b_out, a_out);
  const std::int64_t n = 64 * kMiB;
  const CollectiveResult r =
      simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Hierarchical, t.devices(), n);
  const Picos expected = 2 * (local - 1) * (a_in + (n / local) * 10) + 2 * (a_out + (n / (2 * local)) * 40);
  REQUIRE(r.time_ps == expected);
  REQUIRE(r.algorithm == Algorithm::Hierarchical);
  // Ring over the 8 ranks: 4 rail-aligned rings; Auto is never slower than any candidate.
  const auto ring = simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Ring, t.devices(), n);
  const auto tree = simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Tree, t.devices(), n);
  const auto best = simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Auto, t.devices(), n);
  REQUIRE(best.time_ps == std::min({ring.time_ps, tree.time_ps, r.time_ps}));
}

TEST_CASE("ring all-reduce of 1 GiB on a DGX A100 runs at NVLink speed, never above", "[sim]") {
  const Topology t = Topology::preset("dgx-a100");
  const CollectiveResult r =
      simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Ring, t.devices(), 1024 * kMiB);
  REQUIRE(r.busbw_GBps <= 300.0);
  REQUIRE(r.busbw_GBps > 0.99 * 300.0);
  const Topology h = Topology::preset("dgx-h100");
  const auto rh = simulate_collective(h, CollectiveOp::AllReduce, Algorithm::Auto, h.devices(), 1024 * kMiB);
  REQUIRE(rh.busbw_GBps <= 450.0);
  REQUIRE(rh.busbw_GBps > 0.95 * 450.0);
  // Across nodes the ring is held to the NICs: 8 rails of 25 GB/s per node.
  const Topology c = Topology::preset("dgx-a100:4");
  const auto rc = simulate_collective(c, CollectiveOp::AllReduce, Algorithm::Ring, c.devices(), 1024 * kMiB);
  REQUIRE(rc.busbw_GBps <= 8 * 25.0);
  REQUIRE(rc.busbw_GBps > 0.9 * 8 * 25.0);
}

TEST_CASE("tree and small messages: latency-bound sizes favour the tree", "[sim]") {
  const Topology t = Topology::preset("dgx-a100:8");
  const auto ring = simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Ring, t.devices(), 64 * 1024);
  const auto tree = simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Tree, t.devices(), 64 * 1024);
  REQUIRE(tree.time_ps < ring.time_ps);
  const auto big = simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Tree, t.devices(), 256 * kMiB);
  REQUIRE(big.busbw_GBps <= 300.0);
  REQUIRE(big.busbw_GBps > 10.0);
  const auto bc = simulate_collective(t, CollectiveOp::Broadcast, Algorithm::Auto, t.devices(), 64 * kMiB);
  REQUIRE(bc.busbw_GBps <= 300.0);
}

TEST_CASE("a repeated step costs the same as the step written out", "[sim]") {
  const Topology t = Topology::preset("dgx-a100:2");
  CollectivePlan once = plan_collective(t, CollectiveOp::AllReduce, Algorithm::Ring, t.devices(), 8 * kMiB);
  REQUIRE(once.steps.size() == 1);
  REQUIRE(once.steps[0].repeat == 2 * 15);
  CollectivePlan expanded = once;
  expanded.steps.assign(30, once.steps[0]);
  for (auto& s : expanded.steps) s.repeat = 1;
  const auto a = simulate_plan(t, once, t.devices());
  const auto b = simulate_plan(t, expanded, t.devices());
  REQUIRE(a.time_ps == b.time_ps);
  REQUIRE(a.edge_bytes == b.edge_bytes);
}

TEST_CASE("collective simulation is deterministic", "[sim]") {
  const Topology t = Topology::preset("dgx-h100:4:fat-tree");
  for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::Hierarchical}) {
    const auto x = simulate_collective(t, CollectiveOp::AllReduce, a, t.devices(), 100'000'001);
    const auto y = simulate_collective(Topology(t), CollectiveOp::AllReduce, a, t.devices(), 100'000'001);
    REQUIRE(x.time_ps == y.time_ps);
    REQUIRE(x.edge_bytes == y.edge_bytes);
  }
}

TEST_CASE("collective requests that cannot run are refused", "[sim]") {
  const Topology t = Topology::preset("dgx-a100");
  const auto g = t.devices();
  REQUIRE(lacks(error_of([&] { simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Hierarchical, g, 1); }),
                {"no hier algorithm", "≥ 2 hosts", "ring, tree"}) == "");
  REQUIRE(lacks(error_of([&] { simulate_collective(t, CollectiveOp::AllGather, Algorithm::Tree, g, 1); }),
                {"all_gather has no tree"}) == "");
  REQUIRE(lacks(error_of([&] { simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Ring, {}, 1); }),
                {"at least one rank"}) == "");
  REQUIRE(lacks(error_of([&] { simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Ring, {g[0], g[0]}, 1); }),
                {"rank 1", "node0/gpu0", "its own device"}) == "");
  REQUIRE(lacks(error_of([&] { simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Ring, {g[0], 0}, 1); }),
                {"rank 1", "node0/nvswitch", "gpu or cpu"}) == "");
  REQUIRE(lacks(error_of([&] { simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Ring, g, -4); }),
                {"-4 bytes"}) == "");
  REQUIRE(lacks(error_of([] { parse_collective_op("allreduce"); }), {"\"allreduce\"", "all_reduce"}) == "");
  REQUIRE(lacks(error_of([] { parse_algorithm("nvls"); }), {"\"nvls\"", "hier"}) == "");
  REQUIRE(parse_algorithm("hierarchical") == Algorithm::Hierarchical);
  REQUIRE(parse_collective_op(collective_op_name(CollectiveOp::ReduceScatter)) == CollectiveOp::ReduceScatter);
  const auto one = simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Auto, {g[3]}, 1 << 20);
  REQUIRE(one.time_ps == 0);
  REQUIRE(one.busbw_GBps == 0);
  REQUIRE(busbw_factor(CollectiveOp::AllReduce, 8) == 2.0 * 7 / 8);
  REQUIRE(busbw_factor(CollectiveOp::AllGather, 8) == 7.0 / 8);
  REQUIRE(busbw_factor(CollectiveOp::Broadcast, 8) == 1.0);
}
