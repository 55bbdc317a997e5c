// Collectives over direct-link meshes (AMD Infinity Fabric, a link per GPU pair): the direct
// algorithm's closed forms on mi300x, which groups are offered it, Auto's choice, and that no
// topology without such a mesh sees it.
#include "sim_test_util.hpp"
#include "tessera/sim/collectives.hpp"

using namespace tessera;
using namespace tessera::sim;
using tessera::simtest::error_of;
using tessera::simtest::lacks;

namespace {

constexpr std::int64_t kMiB = 1 << 20;
constexpr double kXgmiBw = 64e9;     // per direction per GPU pair (topology_presets.cpp)
constexpr Picos kXgmiLat = 600'000;  // one link, GPU to GPU

bool offers_direct(const Topology& t, CollectiveOp op, const std::vector<int>& group) {
  const auto c = candidate_algorithms(t, op, group);
  return std::find(c.begin(), c.end(), Algorithm::Direct) != c.end();
}

std::vector<int> first(const Topology& t, int n) {
  const auto d = t.devices();
  return {d.begin(), d.begin() + n};
}

}  // namespace

TEST_CASE("direct all-reduce on mi300x: two steps of n/p over all p−1 links at once", "[sim]") {
  // Reduce-scatter: every rank sends n/p to each of the other p−1 over its own link, all at once;
  // all-gather: the same. Time = 2·(α + (n/p)/B), so busbw = 2(p−1)/p·n / time → (p−1)·B = 448
  // GB/s for 8 ranks on 64 GB/s links, where a ring's busbw is at most B (one link per rank).
  const Topology t = Topology::preset("mi300x");
  const int p = GENERATE(3, 4, 8);
  const auto g = first(t, p);
  const std::int64_t n = 1024 * kMiB;
  const CollectiveResult r =
      simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Direct, g, n);
  const Picos expected = 2 * (kXgmiLat + transfer_time_ps(double((n + p - 1) / p), kXgmiBw));
  REQUIRE(r.algorithm == Algorithm::Direct);
  REQUIRE(r.time_ps == expected);
  const double busbw = 2.0 * (p - 1) / p * double(n) / (double(expected) / 1e12) / 1e9;
  REQUIRE_THAT(r.busbw_GBps, WithinRel(busbw, 1e-12));
  REQUIRE(r.busbw_GBps < (p - 1) * kXgmiBw / 1e9);
  REQUIRE(r.busbw_GBps > 0.99 * (p - 1) * kXgmiBw / 1e9);
  // Each directed link between two members carried 2·n/p; nothing else carried anything.
  const double per_link = 2.0 * double((n + p - 1) / p);
  double total = 0;
  for (double b : r.edge_bytes) total += b;
  REQUIRE(r.edge_bytes[t.route(g[0], g[1])[0]] == per_link);
  REQUIRE(r.edge_bytes[t.route(g[p - 1], g[0])[0]] == per_link);
  REQUIRE(total == per_link * p * (p - 1));

  const auto ring = simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Ring, g, n);
  REQUIRE(ring.busbw_GBps < kXgmiBw / 1e9);
  const auto best = simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Auto, g, n);
  REQUIRE(best.algorithm == Algorithm::Direct);
  REQUIRE(best.time_ps == r.time_ps);
}

TEST_CASE("direct all-gather, reduce-scatter and all-to-all on mi300x: one step", "[sim]") {
  const Topology t = Topology::preset("mi300x");
  const auto g = t.devices();
  const std::int64_t n = 64 * kMiB + 3;  // not a multiple of 8: chunks round up
  const Picos expected = kXgmiLat + transfer_time_ps(double((n + 7) / 8), kXgmiBw);
  for (CollectiveOp op :
       {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllToAll}) {
    INFO(collective_op_name(op));
    const auto r = simulate_collective(t, op, Algorithm::Direct, g, n);
    REQUIRE(r.time_ps == expected);
    const auto best = simulate_collective(t, op, Algorithm::Auto, g, n);
    REQUIRE(best.algorithm == Algorithm::Direct);
  }
  REQUIRE_FALSE(offers_direct(t, CollectiveOp::Broadcast, g));
}

TEST_CASE("direct all-reduce's repeated step equals its two steps expanded", "[sim]") {
  const Topology t = Topology::preset("mi300x");
  const CollectivePlan once =
      plan_collective(t, CollectiveOp::AllReduce, Algorithm::Direct, t.devices(), 8 * kMiB);
  REQUIRE(once.steps.size() == 1);
  REQUIRE(once.steps[0].repeat == 2);
  REQUIRE(once.steps[0].transfers.size() == 8u * 7u);
  CollectivePlan expanded = once;
  expanded.steps.assign(2, once.steps[0]);
  for (auto& s : expanded.steps) s.repeat = 1;
  const auto a = simulate_plan(t, once, t.devices());
  const auto b = simulate_plan(t, expanded, t.devices());
  REQUIRE(a.time_ps == b.time_ps);
  REQUIRE(a.edge_bytes == b.edge_bytes);
  REQUIRE(plan_lower_bound(t, once, t.devices()) <= a.time_ps);
}

TEST_CASE("direct all-reduce across mi300x hosts: direct phases around the rail all-reduce",
          "[sim]") {
  const Topology t = Topology::preset("mi300x:2");
  const auto g = t.devices();
  const std::int64_t n = 1024 * kMiB;
  const CollectivePlan plan = plan_collective(t, CollectiveOp::AllReduce, Algorithm::Direct, g, n);
  REQUIRE(plan.steps.size() == 3);
  REQUIRE(plan.steps[0].transfers.size() == 2u * 8u * 7u);  // within each host
  REQUIRE(plan.steps[0].transfers[0].bytes == n / 8);
  REQUIRE(plan.steps[1].repeat == 2);  // 2(hosts − 1) ring steps of n/16 on each of 8 rails
  REQUIRE(plan.steps[1].transfers.size() == 8u * 2u);
  REQUIRE(plan.steps[1].transfers[0].bytes == n / 16);
  // The direct phases replace hier's 2·7 ring steps of n/8 over one link with 2 steps of n/8 over
  // seven: faster than hier, and the fastest at 1 GiB.
  const auto direct = simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Direct, g, n);
  const auto hier = simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Hierarchical, g, n);
  REQUIRE(direct.time_ps < hier.time_ps);
  REQUIRE(simulate_collective(t, CollectiveOp::AllReduce, Algorithm::Auto, g, n).algorithm ==
          Algorithm::Direct);
  // Only all_reduce has a multi-host direct plan.
  REQUIRE_FALSE(offers_direct(t, CollectiveOp::AllGather, g));
  REQUIRE(lacks(error_of([&] {
                  simulate_collective(t, CollectiveOp::AllGather, Algorithm::Direct, g, n);
                }),
                {"all_gather has no direct algorithm", "all_reduce only", "ring"}) == "");
}

TEST_CASE("direct is offered only to groups whose ranks on each host form a link mesh", "[sim]") {
  const Topology mi = Topology::preset("mi300x:2");
  REQUIRE(offers_direct(mi, CollectiveOp::AllReduce, first(mi, 3)));
  REQUIRE_FALSE(offers_direct(mi, CollectiveOp::AllReduce, first(mi, 2)));  // a ring already
  const auto d = mi.devices();
  REQUIRE_FALSE(offers_direct(mi, CollectiveOp::AllReduce, {d[0], d[1], d[2], d[8], d[9]}));
  REQUIRE(offers_direct(mi, CollectiveOp::AllReduce, {d[0], d[1], d[2], d[8], d[9], d[10]}));
  for (const char* preset : {"mi325x:2", "mi355x"})
    REQUIRE(offers_direct(Topology::preset(preset), CollectiveOp::AllReduce,
                          Topology::preset(preset).devices()));
  // NVSwitch, NVLink domains, PCIe and shared memory: no GPU pair on a link of its own, so every
  // op keeps the candidates (and so the results) it had.
  for (const char* preset :
       {"dgx-a100", "dgx-a100:2", "dgx-h100:2:fat-tree", "hgx-b200", "gb200-nvl72", "rtx4090x4",
        "cpu-host:4", "l40s:2", "mi300x:1+dgx-a100:1"}) {
    INFO(preset);
    const Topology t = Topology::preset(preset);
    for (CollectiveOp op :
         {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter,
          CollectiveOp::Broadcast, CollectiveOp::AllToAll})
      REQUIRE_FALSE(offers_direct(t, op, t.devices()));
  }
  const Topology a100 = Topology::preset("dgx-a100");
  REQUIRE(simulate_collective(a100, CollectiveOp::AllReduce, Algorithm::Auto, a100.devices(),
                              1024 * kMiB)
              .algorithm != Algorithm::Direct);
  REQUIRE(lacks(error_of([&] {
                  simulate_collective(a100, CollectiveOp::AllReduce, Algorithm::Direct,
                                      a100.devices(), 1);
                }),
                {"all_reduce has no direct algorithm", "direct links", "ring, tree"}) == "");
}

TEST_CASE("direct's name parses and prints", "[sim]") {
  REQUIRE(parse_algorithm("direct") == Algorithm::Direct);
  REQUIRE(algorithm_name(Algorithm::Direct) == "direct");
  REQUIRE(lacks(error_of([] { parse_algorithm("oneshot"); }), {"\"oneshot\"", "direct"}) == "");
}
