// bench_halo: the halo exchange's own time per training step (nn::HaloExchange, forward gather
// plus backward scatter-add, no convolution between) for ConvNeXt layers sharded along W over 2
// ranks, on the in-process `local` backend (threads) or, under `tessera launch`, on a network
// backend (one process per rank).
//   bench_halo [--backend local|ucx] [--reps N] [--cases stem,dw7,dw7_wide] [--json]
//   tools/tessera launch --nproc 2 -- build/ci/bench/bench_halo --backend ucx
// An exchange step is: barrier, then on every rank HaloExchange::start_forward + finish_forward,
// then a new HaloExchange's start_backward + finish_backward, each exchange built for the step as
// nn::conv2d_forward/backward build theirs (staging buffers from the allocator every step); also
// each direction alone. A time is the slowest rank's; figures are the median over --reps steps
// with [q1-q3] and [min-max], in microseconds, after 5 warm-up steps.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/core/version.hpp"
#include "tessera/nn/halo_exchange.hpp"

namespace tessera::bench {
namespace {

using core::Tensor;

struct Options {
  std::string backend = "local";
  int reps = 200;
  std::vector<std::string> cases = {"stem", "dw7", "dw7_wide"};
  bool json = false;
};

/// One convolution and the (N, C, H, W) input it sees, sharded along W over 2 ranks.
struct Case {
  std::string name;
  nn::ConvSpec spec;
  core::Shape input;
};

/// The ConvNeXt stem (4x4/s4) and a stage-1 7x7 depthwise on the stem's output, both from a
/// 3x512x1024 image; dw7_wide: the 7x7 depthwise on the image itself (wide, thin halos).
Case make_case(const std::string& name) {
  if (name == "stem") return {name, nn::ConvSpec::square(3, 96, 4, 4, 0), {1, 3, 512, 1024}};
  if (name == "dw7") return {name, nn::ConvSpec::square(96, 96, 7, 1, 3, 1, 96), {1, 96, 128, 256}};
  if (name == "dw7_wide")
    return {name, nn::ConvSpec::square(3, 3, 7, 1, 3, 1, 3), {1, 3, 512, 1024}};
  std::fprintf(stderr, "bench_halo: unknown case '%s' (stem, dw7, dw7_wide)\n", name.c_str());
  std::exit(2);
}

void fill(Tensor& t, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = u(g);
}

struct Row {
  std::string name, what;
  std::int64_t halo_bytes = 0;  // bytes this rank receives in the forward
  Stats us;
};

double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The slowest rank's microseconds of `step`, per rep, after 5 warm-up reps.
Stats time_steps(comm::Backend& world, int reps, const std::function<void()>& step) {
  std::vector<double> us;
  for (int r = -5; r < reps; ++r) {
    world.barrier();
    const double t0 = now_us();
    step();
    double t = now_us() - t0;
    world.all_reduce({&t, 1, core::DType::F64}, comm::ReduceOp::Max)->wait();
    if (r >= 0) us.push_back(t);
  }
  return stats_of(us);
}

std::vector<Row> measure(comm::Backend& world, const Options& o, const Case& c) {
  const int rank = world.rank();
  const core::DeviceMesh mesh({world.size()}, {"sp"});
  const core::Layout in(mesh, c.input, {core::Shard(3)});
  const nn::HaloPlan plan =
      nn::make_halo_plan(c.spec, in, nn::conv_output_layout(c.spec, in), rank);
  compute::cpu::CpuBackend cpu(1);
  auto alloc = std::make_shared<core::Allocator>("bench");
  Tensor x =
      Tensor::empty(in.local_shape(rank), core::DType::F32, core::MemCategory::Activation, alloc);
  Tensor dbuf =
      Tensor::empty(plan.need.shape(), core::DType::F32, core::MemCategory::Activation, alloc);
  fill(x, 1 + rank), fill(dbuf, 7 + rank);
  const std::int64_t bytes = plan.recv_elems() * 4;
  auto forward = [&] {
    nn::HaloExchange fwd(plan, &world, alloc, &cpu);
    fwd.start_forward(x);
    fwd.finish_forward();
  };
  auto backward = [&] {
    nn::HaloExchange bwd(plan, &world, alloc, &cpu);
    bwd.start_backward(dbuf);
    (void)bwd.finish_backward();
  };
  std::vector<Row> rows;
  rows.push_back({c.name, "exchange fwd+bwd", bytes, time_steps(world, o.reps, [&] {
                    forward();
                    backward();
                  })});
  rows.push_back({c.name, "exchange fwd", bytes, time_steps(world, o.reps, forward)});
  rows.push_back({c.name, "exchange bwd", bytes, time_steps(world, o.reps, backward)});
  return rows;
}

void print(const Options& o, const std::vector<Row>& rows) {
  if (o.json) {
    std::vector<std::string> items;
    for (const Row& r : rows)
      items.push_back(Json()
                          .str("case", r.name)
                          .str("what", r.what)
                          .num("halo_bytes", double(r.halo_bytes))
                          .num("median_us", r.us.median)
                          .num("q1_us", r.us.q1)
                          .num("q3_us", r.us.q3)
                          .num("min_us", r.us.min)
                          .num("max_us", r.us.max)
                          .str());
    Json top;
    top.str("tessera_version", std::string(core::version()))
        .str("build", core::build_description())
        .str("bench", "halo")
        .str("backend", o.backend)
        .num("ranks", 2)
        .num("reps", o.reps)
        .raw("rows", json_array(items));
    std::printf("%s\n", top.str().c_str());
    return;
  }
  std::printf("%s\n", core::version_line().c_str());
  std::printf("bench_halo: %s backend, 2 ranks, W-sharded, f32; slowest rank, %d steps\n",
              o.backend.c_str(), o.reps);
  std::printf("%-9s %-28s %10s %10s %21s %21s\n", "case", "what", "halo KiB", "median us",
              "[q1-q3] us", "[min-max] us");
  for (const Row& r : rows)
    std::printf("%-9s %-28s %10.1f %10.1f [%8.1f-%8.1f] [%8.1f-%8.1f]\n", r.name.c_str(),
                r.what.c_str(), double(r.halo_bytes) / 1024, r.us.median, r.us.q1, r.us.q3,
                r.us.min, r.us.max);
}

void run_rank(comm::Backend& world, const Options& o) {
  std::vector<Row> rows;
  for (const std::string& name : o.cases)
    for (Row& r : measure(world, o, make_case(name))) rows.push_back(std::move(r));
  if (world.rank() == 0) print(o, rows);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_halo: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--backend")
      o.backend = value();
    else if (a == "--reps")
      o.reps = std::max(1, std::atoi(value().c_str()));
    else if (a == "--json")
      o.json = true;
    else if (a == "--cases") {
      o.cases.clear();
      std::string s = value(), item;
      for (std::size_t k = 0; k <= s.size(); ++k)
        if (k == s.size() || s[k] == ',')
          o.cases.push_back(item), item.clear();
        else
          item += s[k];
    } else {
      std::fprintf(stderr,
                   "usage: bench_halo [--backend local|ucx] [--reps N] [--cases stem,dw7,dw7_wide] "
                   "[--json]\n  (a network backend: tools/tessera launch --nproc 2 -- bench_halo "
                   "--backend ucx)\n");
      std::exit(a == "--help" ? 0 : 2);
    }
  }
  return o;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  using namespace tessera;
  const bench::Options o = bench::parse(argc, argv);
  try {
    if (o.backend == "local") {
      comm::local::run(2, [&](comm::Backend& world) { bench::run_rank(world, o); });
    } else {
      WorldBackend job = make_world_backend(o.backend, std::chrono::minutes(2));
      bench::run_rank(*job.world, o);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_halo: %s\n", e.what());
    return 1;
  }
  return 0;
}
