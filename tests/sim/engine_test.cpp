// The event engine: kernel roofline times, hand-built programs whose iteration time is known in
// closed form (serial kernels, a waited all-reduce, an overlapped one, a halo exchange), and
// deterministic, overlap-sensitive results for a replayed training step.
#include <cmath>
#include <cstdio>
#include <set>

#include "sim_test_util.hpp"
#include "support/catch.hpp"
#include "tessera/sim/engine.hpp"

using namespace tessera;
using sim::Picos;
using sim::ProgramOp;

namespace {

ProgramOp kernel(double flops, std::int64_t bytes, std::vector<int> deps) {
  ProgramOp op;
  op.kind = ProgramOp::Kind::Compute;
  op.op = compute::OpKind::Add;
  op.name = "add";
  op.flops = flops;
  op.bytes = bytes;
  op.deps = std::move(deps);
  return op;
}

ProgramOp all_reduce(std::int64_t bytes, std::vector<int> group, std::vector<int> deps) {
  ProgramOp op;
  op.kind = ProgramOp::Kind::Collective;
  op.name = "all_reduce";
  op.bytes = bytes;
  op.group = std::move(group);
  op.deps = std::move(deps);
  return op;
}

sim::RankReplay rank_with(int rank, sim::Program p) {
  sim::RankReplay r;
  r.rank = rank;
  r.coords = {rank};
  r.program = std::move(p);
  return r;
}

}  // namespace

TEST_CASE("kernel time is the roofline of the device catalog", "[sim][engine]") {
  const sim::DeviceCatalog cat;
  const sim::DeviceSpec& a100 = cat.get("a100-80gb");
  sim::EngineOptions o;
  o.launch_overhead = false;
  // Memory-bound elementwise op: bytes / (bw · eff_elementwise).
  const ProgramOp add = kernel(1e6, 1'000'000'000, {});
  const double t_add = 1e9 / (a100.mem_bw_bytes_per_s * a100.eff_elementwise);
  REQUIRE(std::llabs(sim::kernel_time_ps(add, a100, o) - std::llround(t_add * 1e12)) <= 1);
  // Compute-bound convolution: flops / (peak · eff_gemm); an override replaces the efficiency.
  ProgramOp conv = kernel(1e13, 1000, {});
  conv.op = compute::OpKind::Conv2dForward;
  conv.name = "conv2d_forward";
  const double t_conv = 1e13 / (a100.peak_fp32_flops * a100.eff_gemm);
  REQUIRE(std::llabs(sim::kernel_time_ps(conv, a100, o) - std::llround(t_conv * 1e12)) <= 1);
  o.efficiency["conv2d_forward"] = 1.0;
  REQUIRE(std::llabs(sim::kernel_time_ps(conv, a100, o) - std::llround(1e13 / a100.peak_fp32_flops * 1e12)) <= 1);
  o.launch_overhead = true;
  REQUIRE(sim::kernel_time_ps(kernel(0, 0, {}), a100, o) == std::llround(a100.launch_overhead_s * 1e12));
}

TEST_CASE("serial kernels take the sum of their times", "[sim][engine]") {
  const sim::Topology topo = simtest::star(1, 100e9, 1000);
  const sim::DeviceCatalog cat;
  const sim::Program p = {kernel(0, 1 << 20, {}), kernel(0, 1 << 22, {0}), kernel(1e9, 0, {1})};
  const sim::SimResult r = sim::simulate_iteration({rank_with(0, p)}, topo, cat);
  Picos sum = 0;
  for (const ProgramOp& op : p) sum += sim::kernel_time_ps(op, cat.get("a100-80gb"), {});
  REQUIRE(r.iteration_ps == sum);
  REQUIRE(r.devices.at(0).compute_busy_ps == sum);
  REQUIRE(r.devices.at(0).comm_busy_ps == 0);
  REQUIRE(r.trace.size() == 6);  // three kernels, three memory counters
}

TEST_CASE("a waited all-reduce adds its time, an unwaited one overlaps", "[sim][engine]") {
  const sim::Topology topo = simtest::star(2, 100e9, 2'000'000);
  const sim::DeviceCatalog cat;
  const sim::DeviceSpec& dev = cat.get("a100-80gb");
  const std::int64_t bytes = 64 << 20;
  const Picos t_coll = sim::simulate_collective(topo, sim::CollectiveOp::AllReduce, sim::Algorithm::Auto,
                                                topo.devices(), bytes).time_ps;
  REQUIRE(t_coll > 0);
  const ProgramOp a = kernel(0, 1 << 24, {}), c = kernel(0, 1 << 26, {0, 1});
  const Picos ta = sim::kernel_time_ps(a, dev, {}), tc = sim::kernel_time_ps(c, dev, {});
  SECTION("waited") {
    std::vector<sim::RankReplay> ranks;
    for (int r = 0; r < 2; ++r) ranks.push_back(rank_with(r, {a, all_reduce(bytes, {0, 1}, {0}), c}));
    const sim::SimResult res = sim::simulate_iteration(ranks, topo, cat);
    REQUIRE(res.iteration_ps == ta + t_coll + tc);
    REQUIRE(res.devices[1].comm_busy_ps == t_coll);
    REQUIRE(!res.links.empty());
  }
  SECTION("overlapped with a long kernel") {
    const ProgramOp d = kernel(0, std::int64_t(1) << 34, {0});  // depends on a only
    const Picos td = sim::kernel_time_ps(d, dev, {});
    REQUIRE(td > t_coll);
    std::vector<sim::RankReplay> ranks;
    for (int r = 0; r < 2; ++r) ranks.push_back(rank_with(r, {a, all_reduce(bytes, {0, 1}, {0}), d}));
    REQUIRE(sim::simulate_iteration(ranks, topo, cat).iteration_ps == ta + td);
  }
}

TEST_CASE("a halo exchange takes latency plus bytes over bandwidth", "[sim][engine]") {
  const double bw = 50e9;
  const Picos alpha = 3'000'000;
  const sim::Topology topo = simtest::star(2, bw, alpha);
  const sim::DeviceCatalog cat;
  const std::int64_t bytes = 10'000'000;
  std::vector<sim::RankReplay> ranks;
  for (int r = 0; r < 2; ++r) {
    ProgramOp x;
    x.kind = ProgramOp::Kind::P2P;
    x.name = "batch_p2p";
    x.transfers = {{false, 1 - r, bytes}, {true, 1 - r, bytes}};  // both directions at once
    x.bytes = 2 * bytes;
    ranks.push_back(rank_with(r, {x}));
  }
  const sim::SimResult res = sim::simulate_iteration(ranks, topo, cat);
  const Picos expected = alpha + static_cast<Picos>(std::ceil(bytes / bw * 1e12));
  REQUIRE(std::llabs(res.iteration_ps - expected) <= 1);
  int sends = 0, recvs = 0;
  for (const core::TraceEvent& e : res.trace) {
    if (e.name == "send") {
      ++sends;
      REQUIRE(e.flow_out);
    }
    if (e.name == "recv") {
      ++recvs;
      REQUIRE(e.flow_in);
    }
  }
  REQUIRE((sends == 2 && recvs == 2));
  REQUIRE(res.links.size() == 4);  // two GPU–switch links, both directions
  REQUIRE(res.links[0].utilisation == Approx(bytes / (bw * (res.iteration_ps / 1e12))).epsilon(1e-9));
}

// CommProgress: with Overlaps a posted collective runs on its own stream while the rank computes;
// with InCalls (local, ucx) it runs whole inside its post, so the next kernel waits for it. A halo
// exchange's sends leave in the post under both, so it hides under a long kernel either way.
// Auto is Overlaps on every device (docs/simulator.md says why).
TEST_CASE("communication progress: overlapping backends hide transfers, in-call ones do not",
          "[sim][engine]") {
  const sim::Topology topo = simtest::star(2, 100e9, 2'000'000);
  const sim::DeviceCatalog cat;
  const sim::DeviceSpec& dev = cat.get("a100-80gb");
  const ProgramOp a = kernel(0, 1 << 24, {}), b = kernel(0, std::int64_t(1) << 33, {0});
  const Picos ta = sim::kernel_time_ps(a, dev, {}), tb = sim::kernel_time_ps(b, dev, {});
  auto with = [](sim::CommProgress p) {
    sim::EngineOptions o;
    o.comm_progress = p;
    return o;
  };
  SECTION("an unwaited all-reduce") {
    const std::int64_t bytes = 64 << 20;
    const Picos t_coll = sim::simulate_collective(topo, sim::CollectiveOp::AllReduce, sim::Algorithm::Auto,
                                                  topo.devices(), bytes).time_ps;
    REQUIRE(tb > t_coll);
    const ProgramOp b_after = kernel(0, std::int64_t(1) << 33, {0});  // depends on a only
    std::vector<sim::RankReplay> ranks;
    for (int r = 0; r < 2; ++r) ranks.push_back(rank_with(r, {a, all_reduce(bytes, {0, 1}, {0}), b_after}));
    REQUIRE(sim::simulate_iteration(ranks, topo, cat, with(sim::CommProgress::Overlaps)).iteration_ps == ta + tb);
    REQUIRE(sim::simulate_iteration(ranks, topo, cat, with(sim::CommProgress::Auto)).iteration_ps == ta + tb);
    REQUIRE(sim::simulate_iteration(ranks, topo, cat, with(sim::CommProgress::InCalls)).iteration_ps ==
            ta + t_coll + tb);
  }
  SECTION("a halo exchange posted before a long kernel and waited for after it") {
    const std::int64_t bytes = 10'000'000;
    const Picos t_x = 2'000'000 + static_cast<Picos>(std::ceil(bytes / 100e9 * 1e12));
    REQUIRE(tb > t_x);
    std::vector<sim::RankReplay> ranks;
    for (int r = 0; r < 2; ++r) {
      ProgramOp x;
      x.kind = ProgramOp::Kind::P2P;
      x.name = "batch_p2p";
      x.transfers = {{false, 1 - r, bytes}, {true, 1 - r, bytes}};
      x.bytes = 2 * bytes;
      x.deps = {0};
      const ProgramOp c = kernel(0, 1 << 24, {2, 1});  // waits for b and the exchange
      ranks.push_back(rank_with(r, {a, x, b, c}));
    }
    const Picos tc = sim::kernel_time_ps(ranks[0].program[3], dev, {});
    for (sim::CommProgress p : {sim::CommProgress::Overlaps, sim::CommProgress::InCalls}) {
      INFO(sim::comm_progress_name(p));
      const sim::SimResult res = sim::simulate_iteration(ranks, topo, cat, with(p));
      REQUIRE(std::llabs(res.iteration_ps - (ta + tb + tc)) <= 1);
      for (const sim::CriticalStep& st : res.critical_path) REQUIRE(st.stream == "compute");
    }
  }
  SECTION("on a cpu device too: InCalls blocks, Auto overlaps") {
    const sim::Topology host = sim::Topology::preset("cpu-host:2", cat);
    const sim::DeviceSpec& cpu = cat.get("cpu-host");
    const Picos ca = sim::kernel_time_ps(a, cpu, {}), cb = sim::kernel_time_ps(b, cpu, {});
    const std::int64_t bytes = 64 << 20;
    const Picos t_coll = sim::simulate_collective(host, sim::CollectiveOp::AllReduce, sim::Algorithm::Auto,
                                                  host.devices(), bytes).time_ps;
    std::vector<sim::RankReplay> ranks;
    for (int r = 0; r < 2; ++r) ranks.push_back(rank_with(r, {a, all_reduce(bytes, {0, 1}, {0}), b}));
    REQUIRE(sim::simulate_iteration(ranks, host, cat, with(sim::CommProgress::InCalls)).iteration_ps ==
            ca + t_coll + cb);
    for (sim::CommProgress p : {sim::CommProgress::Overlaps, sim::CommProgress::Auto})
      REQUIRE(sim::simulate_iteration(ranks, host, cat, with(p)).iteration_ps == ca + std::max(t_coll, cb));
  }
  REQUIRE(sim::parse_comm_progress("in-calls") == sim::CommProgress::InCalls);
  REQUIRE_THROWS_WITH(sim::parse_comm_progress("never"), Catch::Contains("auto, overlaps"));
}

TEST_CASE("mismatched programs are reported, not hung", "[sim][engine]") {
  const sim::Topology topo = simtest::star(2, 100e9, 1000);
  const sim::DeviceCatalog cat;
  std::vector<sim::RankReplay> ranks = {rank_with(0, {all_reduce(1024, {0, 1}, {})}), rank_with(1, {kernel(0, 8, {})})};
  REQUIRE(simtest::lacks(simtest::error_of([&] { sim::simulate_iteration(ranks, topo, cat); }),
                         {"deadlock", "rank 0", "all_reduce"}) == "");
}

TEST_CASE("a replayed training step simulates deterministically, overlap helps", "[sim][engine]") {
  nn::TrainOptions o;
  o.model.family = "convnext";
  o.model.depths = {1, 1, 2, 1};
  o.model.widths = {96, 192, 384, 768};
  o.model.num_classes = 4;
  o.input = {3, 512, 1024};
  o.batch = 2;
  const core::DeviceMesh mesh({4}, {"sp"});
  const sim::Topology topo = sim::Topology::preset("dgx-a100");
  const sim::DeviceCatalog cat;
  const sim::SimResult a = sim::simulate_iteration(sim::replay_all(o, mesh), topo, cat);
  const sim::SimResult b = sim::simulate_iteration(sim::replay_all(o, mesh), topo, cat);
  REQUIRE(a.iteration_ps > 0);
  REQUIRE(a.iteration_ps == b.iteration_ps);
  REQUIRE(a.trace.size() == b.trace.size());
  for (std::size_t i = 0; i < a.trace.size(); ++i) {
    REQUIRE(a.trace[i].name == b.trace[i].name);
    REQUIRE(a.trace[i].ts_us == b.trace[i].ts_us);
  }
  o.overlap = false;
  const sim::SimResult serial = sim::simulate_iteration(sim::replay_all(o, mesh), topo, cat);
  std::printf("engine: convnext 96-192-384-768 depths 1-1-2-1 3x512x1024 batch 2 sp=4 on dgx-a100: overlap %.1f us, no overlap %.1f us\n",
              a.iteration_ps / 1e6, serial.iteration_ps / 1e6);
  REQUIRE(serial.iteration_ps > a.iteration_ps);
  for (const sim::DeviceResult& d : a.devices) REQUIRE(d.memory.peak_total > 0);
}

TEST_CASE("a ring all-reduce puts 2(p-1)/p·n on each direction of every ring link", "[sim][engine]") {
  const int p = 4;
  const sim::Topology topo = simtest::star(p, 100e9, 2'000'000);
  const sim::DeviceCatalog cat;
  const std::int64_t n = std::int64_t(p) << 20;  // divides by p: no rounding
  sim::EngineOptions eo;
  eo.collective_algorithm = sim::Algorithm::Ring;
  std::vector<sim::RankReplay> ranks;
  for (int r = 0; r < p; ++r)
    ranks.push_back(rank_with(r, {kernel(0, 1 << 20, {}), all_reduce(n, {0, 1, 2, 3}, {0}),
                                  all_reduce(0, {0, 1, 2, 3}, {1})}));  // moves nothing: not listed
  const sim::SimResult res = sim::simulate_iteration(ranks, topo, cat, eo);
  REQUIRE(res.collectives.size() == 1);
  const sim::CollectiveUse& c = res.collectives[0];
  REQUIRE(c.name == "all_reduce");
  REQUIRE(c.algorithm == "ring");
  REQUIRE(c.ranks == std::vector<int>{0, 1, 2, 3});
  REQUIRE(c.bytes == n);
  REQUIRE(c.end_ps - c.start_ps ==
          sim::simulate_collective(topo, sim::CollectiveOp::AllReduce, sim::Algorithm::Ring, topo.devices(), n).time_ps);
  // Each ring step sends n/p from gpu i to gpu i+1 over gpu i → switch → gpu i+1: every GPU's
  // link carries 2(p−1) chunks up and 2(p−1) down.
  const double expected = 2.0 * (p - 1) / p * static_cast<double>(n);
  REQUIRE(c.links.size() == 2 * static_cast<std::size_t>(p));
  std::set<std::pair<std::string, std::string>> seen;
  for (const sim::CollectiveLinkBytes& l : c.links) {
    INFO(l.from << " -> " << l.to);
    REQUIRE(l.bytes == expected);
    REQUIRE(l.kind == "nvlink");
    REQUIRE((l.from == "switch") != (l.to == "switch"));
    seen.insert({l.from, l.to});
  }
  REQUIRE(seen.size() == 2 * static_cast<std::size_t>(p));
  // The links' totals are the collectives' bytes (no point-to-point traffic here).
  REQUIRE(res.links.size() == 2 * static_cast<std::size_t>(p));
  for (const sim::LinkUse& u : res.links) REQUIRE(u.bytes == expected);
}
