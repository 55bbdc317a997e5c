// calibrate: the compute factory and world runner sim::calibrate measures with, from the request's
// device and comm backend, and the calibration file written by rank 0.
#include "tessera/run/calibrate.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "tessera/builtin_backends.hpp"
#include "tessera/comm/env_rendezvous.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/devices.hpp"
#include "tessera/sim/calibrate.hpp"

namespace tessera::run {
namespace {

/// cpu → {cpu, -1}, cuda → {cuda, 0}, cuda:N → {cuda, N}; anything else is refused.
Device calibrate_device(const std::string& device) {
  const std::optional<Device> d = try_parse_device(device);
  TESSERA_CHECK(d.has_value(), "calibrate --device '", device,
                "': expected cpu, cuda or cuda:N (N a device index)");
  return *d;
}

/// Fails now, with the backend's own reason, rather than inside a rank thread.
void check_gpu(const CalibrateRequest& a, const Device& device) {
  compute::Registry computes;
  register_builtin_backends(computes);
  TESSERA_CHECK(computes.contains("cuda"), "calibrate --device ", a.device,
                ": this tessera was built without the cuda compute backend (configure with "
                "-DTESSERA_WITH_CUDA=ON "
                "where the CUDA toolkit and cuDNN are installed)");
  TESSERA_CHECK(a.backend == "local", "calibrate --device ", a.device,
                " measures one GPU with in-process ranks; "
                "--backend ",
                a.backend, " is not supported with it (use --backend local)");
  try {
    make_compute(device, 1, a.tf32);
  } catch (const Unsupported& e) {
    throw Unsupported(std::string("calibrate --device ") + a.device + ": " + e.what());
  }
}

/// One rank per process, started by `tessera launch` (env:// rendezvous): the kernels, the link
/// and the reference runs are then measured over that transport.
WorldBackend join_job(const CalibrateRequest& a) {
  const comm::EnvInfo info = comm::read_env();
  TESSERA_CHECK(info.size >= 2, "calibrate --backend ", a.backend,
                " measures between processes: start it with "
                "tessera launch --nproc 2 -- calibrate --backend ",
                a.backend, " (this process is a job of ", info.size, " rank)");
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  return make_world_backend(a.backend, timeout, info);
}

/// "fp32,bf16" → {FP32, BF16}; an unknown name is refused naming it.
std::vector<nn::Precision> parse_precisions(const std::string& list) {
  std::vector<nn::Precision> out;
  std::size_t at = 0;
  while (at <= list.size()) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string name = list.substr(at, comma - at);
    const std::optional<nn::Precision> p = nn::parse_precision(name);
    TESSERA_CHECK(p.has_value(), "calibrate --precisions '", list, "': '", name,
                  "' is not fp32, bf16 or fp16 (e.g. --precisions fp32,bf16)");
    out.push_back(*p);
    at = comma + 1;
  }
  sim::check_precisions(out);
  return out;
}

}  // namespace

CalibrateResult calibrate(const CalibrateRequest& a,
                          const std::function<void(const std::string&)>& progress) {
  TESSERA_CHECK(a.threads >= 1 && a.threads <= 256, "--threads ", a.threads,
                " must be from 1 to 256");
  TESSERA_CHECK(a.ranks >= 1 && a.ranks <= 64, "--ranks ", a.ranks, " must be from 1 to 64");
  const Device device = calibrate_device(a.device);
  TESSERA_CHECK(device.gpu() || !a.tf32,
                "calibrate --tf32 applies to --device cuda (the cpu backend has no TF32)");
  if (device.gpu()) check_gpu(a, device);
  const sim::ComputeFactory make = [device, &a](int threads) {
    return make_compute(device, threads, a.tf32);
  };
  sim::CalibrateOptions o;
  o.tf32 = a.tf32;
  o.threads = a.threads;
  o.ranks = a.ranks;
  o.quick = a.quick;
  o.precisions = parse_precisions(a.precisions);
  sim::WorldRunner run_world = [](int size, const std::function<void(comm::Backend&)>& fn) {
    local_ranks(size, fn);
  };
  WorldBackend job;  // the rendezvous outlives the world (member order)
  if (a.backend != "local") {
    job = join_job(a);
    o.ranks = job.world->size();
    run_world = sim::job_world_runner(*job.world);
  }
  CalibrateResult res;
  res.writer = !job.world || job.world->rank() == 0;
  res.gpu = device.gpu();
  res.calibration = sim::calibrate(make, run_world, o, [&](const std::string& line) {
    if (res.writer && progress) progress(line);
  });
  if (res.writer) sim::save_calibration(res.calibration, a.out);
  return res;
}

}  // namespace tessera::run
