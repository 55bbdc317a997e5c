// `tessera calibrate`: measures this machine with the real cpu backend (or, with --device cuda,
// the cuda backend on a GPU) and the local communicator (sim::calibrate) and writes the
// calibration file that `tessera sim run --calibration FILE` uses.
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "tessera/run/calibrate.hpp"

namespace tessera::tools {

namespace {

int run_calibrate(const run::CalibrateRequest& a) {
  const run::CalibrateResult r =
      run::calibrate(a, [](const std::string& line) { std::printf("%s\n", line.c_str()); });
  if (!r.writer) return 0;
  const sim::Calibration& c = r.calibration;
  // far GB/s: the rate of the bytes beyond a core's L2 (the far-memory term; 0: none).
  std::printf("%-36s %11s %9s %9s %11s  %s\n", "kernel class", "GFLOP/s", "GB/s", "far GB/s",
              "overhead", "samples");
  for (const auto& [name, k] : c.kernels)
    std::printf("%-36s %11.2f %9.2f %9.2f %8.2f us  %zu\n", name.c_str(), k.rate.flops_per_s / 1e9,
                k.rate.bytes_per_s / 1e9, k.rate.far_bytes_per_s / 1e9, k.rate.overhead_s * 1e6,
                k.samples.size());
  if (!r.gpu)
    std::printf(
        "calibration written to %s (use: tessera sim run --topology cpu-host:N --calibration %s)\n",
        a.out.c_str(), a.out.c_str());
  else
    std::printf(
        "calibration of %s written to %s as device %s (use: tessera sim run --device %s "
        "--calibration %s "
        "on a topology of %s devices, e.g. --topology hgx-h200 for h200)\n",
        c.device_copy.memory.c_str(), a.out.c_str(), c.device.name.c_str(), c.device.name.c_str(),
        a.out.c_str(), c.device.name.c_str());
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<run::CalibrateRequest>();
  CLI::App* c = app.add_subcommand(
      "calibrate",
      "Measure this machine (cpu backend, or --device cuda, local ranks) for the simulator");
  c->add_option("--out", a->out, "Calibration file to write")->capture_default_str();
  c->add_option("--threads", a->threads, "Compute threads per rank")->capture_default_str();
  c->add_option("--ranks", a->ranks,
                "Ranks timing the kernels at once (as many as the runs you will simulate)")
      ->capture_default_str();
  c->add_flag("--quick", a->quick, "Fewer sizes and repetitions (a few seconds)");
  c->add_option("--backend", a->backend,
                "Communication backend: local (ranks as threads), or e.g. ucx with one rank per "
                "process under "
                "tessera launch --nproc N -- calibrate --backend ucx")
      ->capture_default_str();
  c->add_option("--device", a->device,
                "Where the kernels run: cpu, or cuda / cuda:N (the cuda compute backend on that "
                "GPU; the file's device "
                "entry is then the GPU's catalog model, e.g. h200)")
      ->capture_default_str();
  c->add_flag("--tf32", a->tf32,
              "With --device cuda: let fp32 convolutions and matrix products use TF32");
  c->add_option("--precisions", a->precisions,
                "Precisions to time the kernels in: fp32, plus bf16 and/or fp16 for simulating "
                "mixed-precision runs (e.g. fp32,bf16)")
      ->capture_default_str();
  c->add_option("--timeout", a->timeout_s,
                "Deadline of every communication wait, seconds (other backends)")
      ->capture_default_str();
  c->callback([&action, a] { action = [a] { return run_calibrate(*a); }; });
}

}  // namespace tessera::tools
