// The critical path the engine reports: a hand-built two-rank program whose path crosses ranks
// through a halo exchange and a collective (known links, each timed independently), and a
// replayed training step whose path adds up to the iteration time and is marked in the trace.
#include <cmath>

#include "sim_test_util.hpp"
#include "support/catch.hpp"
#include "tessera/sim/engine.hpp"

using namespace tessera;
using sim::Picos;
using sim::ProgramOp;

namespace {

ProgramOp kernel(std::string name, std::int64_t bytes, std::vector<int> deps) {
  ProgramOp op;
  op.kind = ProgramOp::Kind::Compute;
  op.op = compute::OpKind::Add;
  op.name = "add";
  op.layer = std::move(name);
  op.bytes = bytes;
  op.deps = std::move(deps);
  return op;
}

ProgramOp exchange(int peer, std::int64_t bytes, std::vector<int> deps) {
  ProgramOp x;
  x.kind = ProgramOp::Kind::P2P;
  x.name = "batch_p2p";
  x.layer = "x";
  x.transfers = {{false, peer, bytes}, {true, peer, bytes}};
  x.bytes = 2 * bytes;
  x.deps = std::move(deps);
  return x;
}

ProgramOp all_reduce(std::int64_t bytes, std::vector<int> deps) {
  ProgramOp op;
  op.kind = ProgramOp::Kind::Collective;
  op.name = "all_reduce";
  op.layer = "r";
  op.bytes = bytes;
  op.group = {0, 1};
  op.deps = std::move(deps);
  return op;
}

Picos sum_of(const std::vector<sim::CriticalStep>& path) {
  Picos total = 0;
  for (const auto& s : path) total += s.dur_ps() + s.wait_ps;
  return total;
}

}  // namespace

TEST_CASE("critical path of a hand-built program crosses ranks at the halo and the collective",
          "[sim][critical]") {
  // Rank 0: long a, exchange, short c, all-reduce, long e. Rank 1: short a, exchange, long c,
  // all-reduce, short e. The exchange waits for rank 0's a; the all-reduce for rank 1's c; the
  // iteration ends with rank 0's e. Path: a@0 -> transfer -> c@1 -> all_reduce@1 -> e@0.
  const double bw = 50e9;
  const Picos alpha = 3'000'000;
  const sim::Topology topo = simtest::star(2, bw, alpha);
  const sim::DeviceCatalog cat;
  const sim::DeviceSpec& dev = cat.get("a100-80gb");
  const std::int64_t halo_bytes = 10'000'000, coll_bytes = 32 << 20;
  auto rank = [&](int r, std::int64_t a, std::int64_t c, std::int64_t e) {
    sim::RankReplay rr;
    rr.rank = r;
    rr.coords = {r};
    rr.program = {kernel("a", a, {}), exchange(1 - r, halo_bytes, {0}), kernel("c", c, {1}),
                  all_reduce(coll_bytes, {2}), kernel("e", e, {3})};
    return rr;
  };
  const std::vector<sim::RankReplay> ranks = {rank(0, 1 << 27, 1 << 20, 1 << 26), rank(1, 1 << 20, 1 << 27, 1 << 20)};
  const sim::SimResult res = sim::simulate_iteration(ranks, topo, cat);

  auto t = [&](const sim::RankReplay& r, int i) { return sim::kernel_time_ps(r.program[i], dev, {}); };
  const Picos t_x = alpha + static_cast<Picos>(std::ceil(halo_bytes / bw * 1e12));
  const Picos t_coll =
      sim::simulate_collective(topo, sim::CollectiveOp::AllReduce, sim::Algorithm::Auto, topo.devices(), coll_bytes)
          .time_ps;
  const Picos expected = t(ranks[0], 0) + t_x + t(ranks[1], 2) + t_coll + t(ranks[0], 4);
  REQUIRE(std::llabs(res.iteration_ps - expected) <= 1);

  const auto& p = res.critical_path;
  REQUIRE(p.size() == 5);
  struct Want {
    int rank, op;
    const char* stream;
    Picos dur;
  };
  const Want want[] = {{0, 0, "compute", t(ranks[0], 0)},
                       {1, 1, "halo", t_x},  // reached through rank 1's c; posted last by rank 0
                       {1, 2, "compute", t(ranks[1], 2)},
                       {1, 3, "collective", t_coll},  // rank 1 arrived last
                       {0, 4, "compute", t(ranks[0], 4)}};
  for (int k = 0; k < 5; ++k) {
    INFO("link " << k);
    REQUIRE(p[k].rank == want[k].rank);
    REQUIRE(p[k].op == want[k].op);
    REQUIRE(p[k].stream == want[k].stream);
    REQUIRE(std::llabs(p[k].dur_ps() - want[k].dur) <= 1);
    REQUIRE(p[k].wait_ps == 0);
  }
  REQUIRE(p[1].peer == 0);
  REQUIRE(p[0].start_ps == 0);
  REQUIRE(p.back().end_ps == res.iteration_ps);
  REQUIRE(sum_of(p) == res.iteration_ps);

  // Marked in the trace: the three kernels, the all-reduce of rank 1, and both ends of the one
  // transfer that finished last; nothing else.
  int marked = 0, marked_halo = 0;
  for (const core::TraceEvent& e : res.trace) {
    if (!e.critical) continue;
    ++marked;
    if (e.cat == "halo") ++marked_halo;
    if (e.cat == "comm") REQUIRE(e.pid == 1);
    if (e.layer == "e") REQUIRE(e.pid == 0);
  }
  REQUIRE(marked == 6);
  REQUIRE(marked_halo == 2);
}

TEST_CASE("a rank that waits for nothing: the path is its serial kernels", "[sim][critical]") {
  const sim::Topology topo = simtest::star(1, 100e9, 1000);
  const sim::DeviceCatalog cat;
  sim::RankReplay r;
  r.rank = 0;
  r.coords = {0};
  r.program = {kernel("a", 1 << 20, {}), kernel("b", 1 << 22, {0}), kernel("c", 1 << 21, {})};
  const sim::SimResult res = sim::simulate_iteration({r}, topo, cat);
  REQUIRE(res.critical_path.size() == 3);  // c follows b on the compute stream
  REQUIRE(res.critical_path[2].layer == "c");
  REQUIRE(sum_of(res.critical_path) == res.iteration_ps);
}

TEST_CASE("the critical path of a replayed training step adds up to the iteration time", "[sim][critical]") {
  nn::TrainOptions o;
  o.model.family = "convnext";
  o.model.depths = {1, 1, 1, 1};
  o.model.widths = {32, 64, 128, 256};
  o.model.num_classes = 4;
  o.input = {3, 256, 512};
  o.batch = 1;
  const core::DeviceMesh mesh({4}, {"sp"});
  const sim::Topology topo = sim::Topology::preset("dgx-a100");
  const sim::DeviceCatalog cat;
  const sim::SimResult res = sim::simulate_iteration(sim::replay_all(o, mesh), topo, cat);
  const auto& p = res.critical_path;
  REQUIRE(p.size() > 10);
  REQUIRE(sum_of(p) == res.iteration_ps);
  Picos prev_end = 0;
  bool halo = false;
  for (const auto& s : p) {
    REQUIRE(s.start_ps == prev_end + s.wait_ps);
    REQUIRE(s.end_ps >= s.start_ps);
    prev_end = s.end_ps;
    halo |= s.stream == "halo";
  }
  REQUIRE(halo);  // forward halo exchanges wait for the neighbours' kernels
  int marked = 0;
  for (const core::TraceEvent& e : res.trace) marked += e.critical ? 1 : 0;
  int expected = 0;
  for (const auto& s : p) expected += s.stream == "halo" ? 2 : 1;
  REQUIRE(marked == expected);
}
