// `tessera calibrate`: measures this machine with the real cpu backend (or, with --device cuda,
// the cuda backend on a GPU) and the local communicator (sim::calibrate) and writes the
// calibration file that `tessera sim run --calibration FILE` uses.
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
  std::string device = "cpu";  ///< cpu, cuda, cuda:N
  bool tf32 = false;
};

/// "cpu" → -1, "cuda" → 0, "cuda:N" → N; anything else is refused.
int device_index(const std::string& device) {
  if (device == "cpu") return -1;
  if (device == "cuda") return 0;
  const bool ok = device.size() > 5 && device.size() <= 9 && device.compare(0, 5, "cuda:") == 0 &&
                  device.find_first_not_of("0123456789", 5) == std::string::npos;
  TESSERA_CHECK(ok, "calibrate --device '", device, "': expected cpu, cuda or cuda:N (N a device index)");
  return std::stoi(device.substr(5));
}

int run_calibrate(const CalibrateArgs& a) {
  TESSERA_CHECK(a.threads >= 1 && a.threads <= 256, "--threads ", a.threads, " must be from 1 to 256");
  TESSERA_CHECK(a.ranks >= 1 && a.ranks <= 64, "--ranks ", a.ranks, " must be from 1 to 64");
  const int device = device_index(a.device);
  TESSERA_CHECK(device >= 0 || !a.tf32, "calibrate --tf32 applies to --device cuda (the cpu backend has no TF32)");
  compute::Registry computes;
  register_builtin_backends(computes);
  const std::string compute_name = device < 0 ? "cpu" : "cuda";
  if (device >= 0) {
    TESSERA_CHECK(computes.contains("cuda"), "calibrate --device ", a.device,
                  ": this tessera was built without the cuda compute backend (configure with -DTESSERA_WITH_CUDA=ON "
                  "where the CUDA toolkit and cuDNN are installed)");
    TESSERA_CHECK(a.backend == "local", "calibrate --device ", a.device, " measures one GPU with in-process ranks; "
                  "--backend ", a.backend, " is not supported with it (use --backend local)");
    // Fail now, with the backend's own reason, rather than inside a rank thread.
    try {
      computes.create("cuda", compute::BackendOptions{1, device, a.tf32});
    } catch (const Unsupported& e) {
      throw Unsupported(std::string("calibrate --device ") + a.device + ": " + e.what());
    }
  }
  const sim::ComputeFactory make_compute = [&computes, compute_name, device, &a](int threads) {
    return computes.create(compute_name, compute::BackendOptions{threads, std::max(device, 0), a.tf32});
  };
  sim::CalibrateOptions o;
  o.tf32 = a.tf32;
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
    run_world = sim::job_world_runner(*world);
  }
  const bool writer = !world || world->rank() == 0;
  const sim::Calibration c = sim::calibrate(make_compute, run_world, o, [writer](const std::string& line) {
    if (writer) std::printf("%s\n", line.c_str());
  });
  if (!writer) return 0;
  sim::save_calibration(c, a.out);
  // far GB/s: the rate of the bytes beyond a core's L2 (the far-memory term; 0: none).
  std::printf("%-36s %11s %9s %9s %11s  %s\n", "kernel class", "GFLOP/s", "GB/s", "far GB/s", "overhead", "samples");
  for (const auto& [name, k] : c.kernels)
    std::printf("%-36s %11.2f %9.2f %9.2f %8.2f us  %zu\n", name.c_str(), k.rate.flops_per_s / 1e9,
                k.rate.bytes_per_s / 1e9, k.rate.far_bytes_per_s / 1e9, k.rate.overhead_s * 1e6, k.samples.size());
  if (device < 0)
    std::printf("calibration written to %s (use: tessera sim run --topology cpu-host:N --calibration %s)\n",
                a.out.c_str(), a.out.c_str());
  else
    std::printf("calibration of %s written to %s as device %s (use: tessera sim run --device %s --calibration %s "
                "on a topology of %s devices, e.g. --topology hgx-h200 for h200)\n",
                c.device_copy.memory.c_str(), a.out.c_str(), c.device.name.c_str(), c.device.name.c_str(),
                a.out.c_str(), c.device.name.c_str());
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<CalibrateArgs>();
  CLI::App* c = app.add_subcommand("calibrate", "Measure this machine (cpu backend, or --device cuda, local ranks) for the simulator");
  c->add_option("--out", a->out, "Calibration file to write")->capture_default_str();
  c->add_option("--threads", a->threads, "Compute threads per rank")->capture_default_str();
  c->add_option("--ranks", a->ranks, "Ranks timing the kernels at once (as many as the runs you will simulate)")
      ->capture_default_str();
  c->add_flag("--quick", a->quick, "Fewer sizes and repetitions (a few seconds)");
  c->add_option("--backend", a->backend,
                "Communication backend: local (ranks as threads), or e.g. ucx with one rank per process under "
                "tessera launch --nproc N -- calibrate --backend ucx")
      ->capture_default_str();
  c->add_option("--device", a->device,
                "Where the kernels run: cpu, or cuda / cuda:N (the cuda compute backend on that GPU; the file's device "
                "entry is then the GPU's catalog model, e.g. h200)")
      ->capture_default_str();
  c->add_flag("--tf32", a->tf32, "With --device cuda: let fp32 convolutions and matrix products use TF32");
  c->add_option("--timeout", a->timeout_s, "Deadline of every communication wait, seconds (other backends)")
      ->capture_default_str();
  c->callback([&action, a] { action = [a] { return run_calibrate(*a); }; });
}

}  // namespace tessera::tools
