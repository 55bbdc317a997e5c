// `tessera calibrate`: measures this machine with the real cpu backend and the local
// communicator (sim::calibrate) and writes the calibration file that `tessera sim run
// --calibration FILE` uses.
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/comm/env_rendezvous.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/comm/registry.hpp"
#include "tessera/core/error.hpp"
#include "tessera/sim/calibrate.hpp"

namespace tessera::tools {

namespace {

struct CalibrateArgs {
  std::string out = "calibration.json";
  int threads = 1;
  int ranks = 1;
  bool quick = false;
  std::string backend = "local";
  double timeout_s = 120;
};

int run_calibrate(const CalibrateArgs& a) {
  TESSERA_CHECK(a.threads >= 1 && a.threads <= 256, "--threads ", a.threads, " must be from 1 to 256");
  TESSERA_CHECK(a.ranks >= 1 && a.ranks <= 64, "--ranks ", a.ranks, " must be from 1 to 64");
  compute::Registry computes;
  register_builtin_backends(computes);
  const sim::ComputeFactory make_compute = [&computes](int threads) {
    return computes.create("cpu", compute::BackendOptions{threads});
  };
  sim::CalibrateOptions o;
  o.threads = a.threads;
  o.ranks = a.ranks;
  o.quick = a.quick;
  sim::WorldRunner run_world = [](int size, const std::function<void(comm::Backend&)>& fn) {
    comm::local::run(size, fn);
  };
  // Another backend: one rank per process, started by `tessera launch` (env:// rendezvous). The
  // kernels, the link and the reference runs are then measured over that transport.
  std::shared_ptr<comm::Rendezvous> rdzv;
  std::unique_ptr<comm::Backend> world;
  if (a.backend != "local") {
    const comm::EnvInfo info = comm::read_env();
    TESSERA_CHECK(info.size >= 2, "calibrate --backend ", a.backend, " measures between processes: start it with "
                  "tessera launch --nproc 2 -- calibrate --backend ", a.backend, " (this process is a job of ", info.size,
                  " rank)");
    const auto timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
    WorldBackend job = make_world_backend(a.backend, timeout, info);
    rdzv = job.rendezvous;
    world = std::move(job.world);
    o.ranks = world->size();
    run_world = [&world](int size, const std::function<void(comm::Backend&)>& fn) {
      TESSERA_CHECK(size <= world->size(), "calibrate: a measurement needs ", size, " ranks; the job has ",
                    world->size());
      if (size == world->size()) return fn(*world);
      std::vector<int> first(static_cast<std::size_t>(size));
      for (int r = 0; r < size; ++r) first[static_cast<std::size_t>(r)] = r;
      std::unique_ptr<comm::Backend> sub = world->split(first);  // every rank takes part
      if (sub) fn(*sub);
      world->barrier();
    };
  }
  const bool writer = !world || world->rank() == 0;
  const sim::Calibration c = sim::calibrate(make_compute, run_world, o, [writer](const std::string& line) {
    if (writer) std::printf("%s\n", line.c_str());
  });
  if (!writer) return 0;
  sim::save_calibration(c, a.out);
  std::printf("%-36s %11s %9s %11s  %s\n", "kernel class", "GFLOP/s", "GB/s", "overhead", "samples");
  for (const auto& [name, k] : c.kernels)
    std::printf("%-36s %11.2f %9.2f %8.2f us  %zu\n", name.c_str(), k.rate.flops_per_s / 1e9,
                k.rate.bytes_per_s / 1e9, k.rate.overhead_s * 1e6, k.samples.size());
  std::printf("calibration written to %s (use: tessera sim run --topology cpu-host:N --calibration %s)\n",
              a.out.c_str(), a.out.c_str());
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<CalibrateArgs>();
  CLI::App* c = app.add_subcommand("calibrate", "Measure this machine (cpu backend, local ranks) for the simulator");
  c->add_option("--out", a->out, "Calibration file to write")->capture_default_str();
  c->add_option("--threads", a->threads, "Compute threads per rank")->capture_default_str();
  c->add_option("--ranks", a->ranks, "Ranks timing the kernels at once (as many as the runs you will simulate)")
      ->capture_default_str();
  c->add_flag("--quick", a->quick, "Fewer sizes and repetitions (a few seconds)");
  c->add_option("--backend", a->backend,
                "Communication backend: local (ranks as threads), or e.g. ucx with one rank per process under "
                "tessera launch --nproc N -- calibrate --backend ucx")
      ->capture_default_str();
  c->add_option("--timeout", a->timeout_s, "Deadline of every communication wait, seconds (other backends)")
      ->capture_default_str();
  c->callback([&action, a] { action = [a] { return run_calibrate(*a); }; });
}

}  // namespace tessera::tools
