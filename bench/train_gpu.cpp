// bench_train --device cuda: one rank's nn::Trainer on the cuda compute backend (its tensors in
// an allocator over the backend's device memory), DropPath off, in --precision (fp32, or bf16/fp16
// mixed precision with f32 master weights), --warmup untimed steps then --steps timed ones, each
// timed on the wall clock between backend.synchronize() calls; then PyTorch eager on the same GPU
// with the same model, input, batch, TF32 setting and precision (bench/torch_gpu_peer.py: AMP
// for bf16/fp16), and the ratios tessera / PyTorch of step time and peak memory.
//
// Peak memory, the same on both sides: the timed steps only. Tessera's booked peak is the highest
// of the timed steps' StepStats::memory.peak_total (the Trainer restarts its allocator's peaks at
// the start of every step); the peer resets torch.cuda's peak counters once its warm-up is done
// and reads max_memory_allocated after the timed steps. Both count what is live during a step:
// parameters, gradients, optimizer state, the input batch, activations and the library
// workspaces (tessera books the cuda backend's in its Workspace category; PyTorch's come from its
// caching allocator); neither counts the warm-up's cuDNN algorithm search (PyTorch's
// cudnn.benchmark trials). Reserved: the device pool's high mark (cudaMemPoolAttrReservedMemHigh)
// beside max_memory_reserved; both allocators keep what they reserved cached, so both are the
// reserve the run ends with, what warm-up cached included.
#include "train_gpu.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "tessera/core/version.hpp"
#include "tessera/data/dataset.hpp"
#include "tessera/nn/trainer.hpp"
#include "train_args.hpp"

#ifdef TESSERA_BENCH_HAVE_CUDA_BACKEND
#include "tessera/compute/cuda.hpp"
#endif

namespace tessera::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct TesseraGpuRun {
  std::string device;
  Stats ms;
  double loss_last = 0;
  std::string loss_scale;  ///< "dynamic", "static" or "off", as the trainer ran
  core::MemStats memory;   ///< peaks: the highest of the timed steps' (see the top of this file)
};

/// Raises the peaks of `into` to those of one step's figures.
void take_peaks(core::MemStats& into, const core::MemStats& step) {
  into.peak_total = std::max(into.peak_total, step.peak_total);
  for (std::size_t c = 0; c < into.peak.size(); ++c)
    into.peak[c] = std::max(into.peak[c], step.peak[c]);
  into.peak_reserved = std::max(into.peak_reserved, step.peak_reserved);
}

TesseraGpuRun measure_tessera(const GpuTrainOptions& o) {
  Gpu gpu = open_gpu(o.device, o.tf32, "bench_train");
#ifdef TESSERA_BENCH_HAVE_CUDA_BACKEND
  // The backend's workspaces (cuDNN, cuBLASLt, partial sums) booked with the rank's tensors.
  if (auto* cd = dynamic_cast<compute::cuda::CudaDevice*>(gpu.backend.get()))
    cd->set_workspace_allocator(gpu.allocator);
#endif
  const nn::TrainOptions t = gpu_trainer_options(o);
  const std::shared_ptr<const data::Dataset> ds = synthetic_data(o.input, o.classes);
  nn::Trainer trainer(t, nullptr, *gpu.backend, gpu.allocator, ds);
  TesseraGpuRun r;
  r.device = gpu.description;
  std::vector<double> ms;
  while (trainer.next_step() < t.steps) {
    gpu.backend->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    const nn::StepStats s = trainer.step();
    gpu.backend->synchronize();
    const double dt =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s.step >= o.warmup) {
      ms.push_back(dt);
      take_peaks(r.memory, s.memory);
    }
    r.loss_last = s.loss;
    if (!o.json)
      std::fprintf(stderr, "  step %lld: %.1f ms, loss %.4f\n", static_cast<long long>(s.step), dt,
                   s.loss);
  }
  r.ms = stats_of(ms);
  const nn::LossScaler scaler(t.loss_scale, t.precision);
  r.loss_scale = scaler.dynamic() ? "dynamic" : scaler.enabled() ? "static" : "off";
  return r;
}

}  // namespace

int run_train_gpu(const GpuTrainOptions& o) {
  const nn::ModelSpec spec = nn::model_preset(o.model);
  TESSERA_CHECK(spec.family == "convnext", "bench_train --device cuda: model ", o.model,
                " is a ", spec.family, "; the GPU bench and its PyTorch peer time ConvNeXt presets");
  const std::string input = std::to_string(o.input[0]) + "x" + std::to_string(o.input[1]) + "x" +
                            std::to_string(o.input[2]);
  const std::string precision(nn::precision_name(o.precision));
  if (!o.json)
    std::fprintf(stderr, "training %s %s batch %d on %s (%s, tf32 %s)...\n", o.model.c_str(),
                 input.c_str(), o.batch, o.device.c_str(), precision.c_str(),
                 o.tf32 ? "on" : "off");
  const TesseraGpuRun r = measure_tessera(o);  // its device memory is released before the peer
  Peer peer;
  if (o.peer) {
    if (!o.json) std::fprintf(stderr, "PyTorch eager peer (%s)...\n", o.peer_command.script.c_str());
    peer = run_torch_peer(o.peer_command, train_peer_args(o));
    // A script of another version may run another precision: no ratio then.
    if (peer.ok && json_text(peer.result, "precision") != precision) {
      peer.ok = false;
      peer.error = o.peer_command.script + " ran precision " + json_text(peer.result, "precision") +
                   ", not " + precision + " as tessera did: no ratio";
    }
  } else {
    peer.error = "--no-torch";
  }
  const double peak_mib = r.memory.peak_total / kMiB;
  const double reserved_mib = r.memory.peak_reserved / kMiB;
  double t_ms = 0, t_alloc = 0, t_res = 0;
  if (peer.ok) {
    t_ms = peer.result["step_ms_median"].get<double>();
    t_alloc = peer.result.value("max_memory_allocated_mib", 0.0);
    t_res = peer.result.value("max_memory_reserved_mib", 0.0);
  }

  if (o.json) {
    Json cats;
    for (int c = 0; c < core::kNumMemCategories; ++c)
      cats.num(std::string(core::mem_category_name(core::MemCategory(c))),
               r.memory.peak[std::size_t(c)] / kMiB);
    Json tj;
    tj.str("precision", precision)
        .str("loss_scale", r.loss_scale)
        .stats("step_ms_", r.ms)
        .num("images_per_s", o.batch / (r.ms.median * 1e-3))
        .num("peak_total_mib", peak_mib)
        .num("peak_reserved_mib", reserved_mib)
        .raw("peak_by_category_mib", cats.str())
        .num("loss_last", r.loss_last);
    Json top;
    top.str("tessera_version", std::string(core::version()))
        .str("build", core::build_description())
        .str("device", o.device)
        .str("device_description", r.device)
        .str("model", o.model)
        .str("input", input)
        .num("batch", o.batch)
        .num("classes", o.classes)
        .str("precision", precision)
        .raw("tf32", o.tf32 ? "true" : "false")
        .num("drop_path", 0)
        .num("warmup_steps", o.warmup)
        .raw("tessera", tj.str())
        .raw("torch", peer_json(peer));
    if (peer.ok)
      top.raw("tessera_over_torch", Json()
                                        .num("step_time", r.ms.median / t_ms)
                                        .num("peak_memory_allocated", t_alloc > 0 ? peak_mib / t_alloc : 0)
                                        .num("peak_memory_reserved", t_res > 0 ? reserved_mib / t_res : 0)
                                        .str());
    else
      top.raw("tessera_over_torch", "null").str("peer", "not available (" + peer.error + ")");
    std::printf("%s\n", top.str().c_str());
    return peer.ok ? 0 : kExitNoPeer;
  }
  std::printf("%s\n", core::version_line().c_str());
  std::printf(
      "%s, input %s, batch %d, %d classes, AdamW, synthetic data, unsharded, on %s\n"
      "%s (loss scaling %s), tf32 %s, DropPath off; step time: wall clock between synchronize() "
      "calls, %d timed steps after %d warm-up; peaks: over the timed steps\n\n",
      o.model.c_str(), input.c_str(), o.batch, o.classes, r.device.c_str(), precision.c_str(),
      r.loss_scale.c_str(), o.tf32 ? "on" : "off", o.steps, o.warmup);
  std::printf("%-8s %10s %21s %9s %12s %13s\n", "impl", "median ms", "[min-max] ms", "images/s",
              "peak MiB", "reserved MiB");
  std::printf("%-8s %10.1f   [%8.1f - %8.1f] %9.2f %12.1f %13.1f\n", "tessera", r.ms.median,
              r.ms.min, r.ms.max, o.batch / (r.ms.median * 1e-3), peak_mib, reserved_mib);
  if (!peer.ok) {
    std::printf("peer: not available (%s)\n", peer.error.c_str());
    return kExitNoPeer;
  }
  std::printf("%-8s %10.1f   [%8.1f - %8.1f] %9.2f %12.1f %13.1f\n", "pytorch", t_ms,
              peer.result.value("step_ms_min", 0.0), peer.result.value("step_ms_max", 0.0),
              o.batch / (t_ms * 1e-3), t_alloc, t_res);
  std::printf(
      "PyTorch %s (CUDA %s, cuDNN %s) on %s, eager, channels-last, %s%s, pointwise as %s\n"
      "tessera / PyTorch: step time %s, peak memory %s (booked / max_memory_allocated), "
      "%s (reserved / max_memory_reserved)\n",
      json_text(peer.result, "torch_version").c_str(), json_text(peer.result, "cuda").c_str(),
      json_text(peer.result, "cudnn").c_str(), json_text(peer.result, "device_name").c_str(),
      precision.c_str(),
      o.precision == nn::Precision::FP32 ? "" : " (torch.autocast, fp32 master weights)",
      o.pointwise.c_str(), ratio_text(r.ms.median, t_ms).c_str(),
      ratio_text(peak_mib, t_alloc).c_str(), ratio_text(reserved_mib, t_res).c_str());
  return 0;
}

}  // namespace tessera::bench
