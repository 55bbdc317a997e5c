// FlowNetwork: exact times for one flow, fair sharing of a link, the max-min allocation of flows
// with different bottlenecks, and the incremental engine against a from-scratch reference.
#include <algorithm>
#include <cmath>
#include <random>

#include "sim_test_util.hpp"
#include "tessera/sim/network.hpp"

using namespace tessera;
using namespace tessera::sim;
using tessera::simtest::error_of;
using tessera::simtest::lacks;
using tessera::simtest::star;

namespace {

/// Reference: all rates recomputed from scratch at every event by textbook progressive filling,
/// in double seconds. Returns each flow's finish time in ps (not rounded).
std::vector<double> reference_finish_ps(const Topology& t,
                                        const std::vector<std::tuple<int, int, double>>& flows) {
  const std::size_t n = flows.size();
  std::vector<double> remaining(n), active_at(n), finish(n, -1);
  for (std::size_t f = 0; f < n; ++f) {
    remaining[f] = std::get<2>(flows[f]);
    active_at[f] = double(t.route_latency(std::get<0>(flows[f]), std::get<1>(flows[f])));
  }
  double now = 0;
  while (std::count(finish.begin(), finish.end(), -1.0) > 0) {
    std::vector<double> rate(n, 0);
    std::vector<bool> frozen(n, true);
    for (std::size_t f = 0; f < n; ++f) frozen[f] = !(finish[f] < 0 && active_at[f] <= now);
    while (true) {  // progressive filling
      double best = 1e300;
      int best_edge = -1;
      for (int e = 0; e < t.num_edges(); ++e) {
        double cap = t.edge_bw(e);
        int count = 0;
        for (std::size_t f = 0; f < n; ++f) {
          const auto& r = t.route(std::get<0>(flows[f]), std::get<1>(flows[f]));
          if (std::find(r.begin(), r.end(), e) == r.end() || finish[f] >= 0 || active_at[f] > now) continue;
          if (frozen[f]) cap -= rate[f]; else ++count;
        }
        if (count > 0 && cap / count < best) best = cap / count, best_edge = e;
      }
      if (best_edge < 0) break;
      for (std::size_t f = 0; f < n; ++f) {
        const auto& r = t.route(std::get<0>(flows[f]), std::get<1>(flows[f]));
        if (!frozen[f] && std::find(r.begin(), r.end(), best_edge) != r.end()) rate[f] = best, frozen[f] = true;
      }
    }
    double next = 1e300;
    for (std::size_t f = 0; f < n; ++f) {
      if (finish[f] >= 0) continue;
      if (active_at[f] > now) next = std::min(next, active_at[f]);
      else next = std::min(next, now + remaining[f] * 1e12 / rate[f]);
    }
    for (std::size_t f = 0; f < n; ++f) {
      if (finish[f] >= 0 || active_at[f] > now) continue;
      remaining[f] -= rate[f] * (next - now) / 1e12;
      if (remaining[f] <= 1e-6 * std::get<2>(flows[f])) finish[f] = next;
    }
    now = next;
  }
  return finish;
}

}  // namespace

TEST_CASE("one flow takes latency + bytes / bandwidth, rounded up to a picosecond", "[sim]") {
  const Topology t = star(2, 1e9, 2'000);  // 1 GB/s: 1 byte per 1000 ps
  FlowNetwork net(t);
  const int f = net.start(1, 2, 1'000'000, "x");
  REQUIRE(net.next_event() == 2'000);
  REQUIRE(net.advance(2'000).empty());
  REQUIRE(net.rate(f) == 1e9);
  REQUIRE(net.run_to_completion() == 2'000 + 1'000'000'000);
  REQUIRE(net.finish_time(f) == 1'000'002'000);
  REQUIRE(net.label(f) == "x");
  const Topology slow = star(2, 3e9, 0);
  FlowNetwork odd(slow);  // 1 byte at 3 GB/s = 333.3 ps: never faster, so 334
  odd.start(1, 2, 1);
  REQUIRE(odd.run_to_completion() == 334);
}

TEST_CASE("two flows on one link each get half of it", "[sim]") {
  const Topology t = star(3, 8e9, 0);
  FlowNetwork net(t);
  const int a = net.start(1, 3, 4'000'000);  // both cross switch → gpu2
  const int b = net.start(2, 3, 4'000'000);
  net.advance(0);
  REQUIRE(net.rate(a) == 4e9);
  REQUIRE(net.rate(b) == 4e9);
  REQUIRE(net.run_to_completion() == 1'000'000'000);  // 8 MB at 8 GB/s
  REQUIRE(net.finish_time(a) == 1'000'000'000);
  REQUIRE(net.edge_bytes()[t.route(1, 3).back()] == 8e6);
  REQUIRE(net.edge_flows()[t.route(1, 3).back()] == std::vector<int>{a, b});
}

TEST_CASE("three flows with different bottlenecks get the max-min allocation", "[sim]") {
  // g0 —A(3 GB/s)— s —B(1 GB/s)— g2, and g1 —C(10 GB/s)— s. Flows: f1 g0→g1 (A, C),
  // f2 g0→g2 (A, B), f3 g1→g2 (C, B). B is the bottleneck: f2 = f3 = 0.5; then A leaves 2.5 to f1.
  Topology t;
  const int s = t.add_node({"s", NodeKind::NvSwitch, "", 0});
  const int g0 = t.add_node({"g0", NodeKind::Gpu, "a100-80gb", 0});
  const int g1 = t.add_node({"g1", NodeKind::Gpu, "a100-80gb", 0});
  const int g2 = t.add_node({"g2", NodeKind::Gpu, "a100-80gb", 0});
  t.add_link(g0, s, 3e9, 0, "x");
  t.add_link(s, g2, 1e9, 0, "x");
  t.add_link(g1, s, 10e9, 0, "x");
  FlowNetwork net(t);
  const int f1 = net.start(g0, g1, 2'500'000);
  const int f2 = net.start(g0, g2, 1'000'000);
  const int f3 = net.start(g1, g2, 250'000);
  net.advance(0);
  REQUIRE(net.rate(f1) == 2.5e9);
  REQUIRE(net.rate(f2) == 0.5e9);
  REQUIRE(net.rate(f3) == 0.5e9);
  // f3 ends at 0.5 ms; then B gives f2 1 GB/s and A leaves f1 2 GB/s for its last 1.25 MB.
  REQUIRE(net.advance(net.next_event()) == std::vector<int>{f3});
  REQUIRE(net.now() == 500'000'000);
  REQUIRE(net.rate(f1) == 2e9);
  REQUIRE(net.rate(f2) == 1e9);
  REQUIRE(net.advance(net.next_event()) == std::vector<int>{f1});
  REQUIRE(net.now() == 1'125'000'000);
  REQUIRE(net.run_to_completion() == 1'250'000'000);
  REQUIRE(net.finish_time(f2) == 1'250'000'000);
}

TEST_CASE("latency passes before data moves, empty and self transfers", "[sim]") {
  const Topology t = star(2, 1e9, 10'000);
  FlowNetwork net(t);
  const int f = net.start(1, 2, 1000);
  REQUIRE(net.rate(f) == 0);
  REQUIRE(net.finish_time(f) == kNever);
  const int self = net.start(1, 1, 5'000'000);
  const int empty = net.start(2, 1, 0);
  REQUIRE(net.next_event() == 0);
  REQUIRE(net.advance(0) == std::vector<int>{self});
  REQUIRE(net.advance(net.next_event()) == std::vector<int>{empty});
  REQUIRE(net.now() == 10'000);
  REQUIRE(net.run_to_completion() == 10'000 + 1'000'000);
  REQUIRE(net.idle());
  REQUIRE(net.next_event() == kNever);
  REQUIRE(lacks(error_of([&] { net.advance(5); }), {"advance(5 ps)", "between now"}) == "");
  REQUIRE(lacks(error_of([&] { net.start(1, 99, 10); }), {"node 99"}) == "");
  REQUIRE(lacks(error_of([&] { net.start(1, 2, -1); }), {"-1 bytes"}) == "");
  REQUIRE(lacks(error_of([&] { net.label(42); }), {"no such flow"}) == "");
}

TEST_CASE("the incremental engine matches a from-scratch max-min reference", "[sim]") {
  const Topology t = Topology::preset("dgx-a100:2");
  const std::vector<int> gpus = t.devices();
  std::mt19937 rng(7);
  std::vector<std::tuple<int, int, double>> flows;
  for (int i = 0; i < 40; ++i) {
    const int a = gpus[rng() % gpus.size()], b = gpus[rng() % gpus.size()];
    if (a != b) flows.emplace_back(a, b, double(1 + rng() % 50) * 1e6);
  }
  FlowNetwork net(t);
  for (const auto& [a, b, bytes] : flows) net.start(a, b, static_cast<std::int64_t>(bytes));
  net.run_to_completion();
  const std::vector<double> ref = reference_finish_ps(t, flows);
  for (std::size_t f = 0; f < flows.size(); ++f) {
    const double got = double(net.finish_time(static_cast<int>(f)));
    REQUIRE(got >= ref[f] - 1e-6 * ref[f]);  // never faster
    REQUIRE(got <= ref[f] * (1 + 1e-6) + 64);  // rounding up at most once per event
  }
}

TEST_CASE("flow simulation is deterministic and handles thousands of flows", "[sim]") {
  // 1500 flows between random GPUs of 8 DGX H100: one connected component and ~1500 distinct
  // finish times, the worst case for the incremental recomputation (≈0.2 s per run here).
  const Topology t = Topology::preset("dgx-h100:8");
  auto run = [&] {
    FlowNetwork net(t);
    std::mt19937 rng(11);
    const auto gpus = t.devices();
    for (int i = 0; i < 1500; ++i) {
      const int a = gpus[rng() % gpus.size()], b = gpus[rng() % gpus.size()];
      net.start(a, b, 1 + rng() % 10'000'000);
    }
    net.run_to_completion();
    std::vector<Picos> finish;
    for (int f = 0; f < net.num_flows(); ++f) finish.push_back(net.finish_time(f));
    return finish;
  };
  const auto first = run();
  REQUIRE(first == run());
  REQUIRE(*std::max_element(first.begin(), first.end()) > 0);
}
