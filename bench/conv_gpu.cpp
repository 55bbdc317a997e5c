// bench_conv --device cuda (conv_gpu.hpp). Per layer and pass (forward; forward + backward with
// the weight, bias and input gradients): time per call, --reps batches of N back-to-back calls
// after --warmup calls, each batch timed between two CUDA events on the backend's compute stream
// and divided by N (time_batched_ms; N so that a batch lasts >= min_batch_ms: a host
// synchronisation around every call would make the short depthwise calls measure launch and
// wait); GFLOP/s and bytes/s from core's own cost counters (compute::op_cost of every call, bytes
// read + written); bytes/s as a share of a device-to-device copy's (read + written) bytes/s
// measured the same way in the same run through the backend's device memory. The PyTorch peer
// times its depthwise convolution the same way (events, batches of >= min_batch_ms). The issue's
// target: the 7x7 depthwise forward + backward at >= 70% of the copy bandwidth.
#include "conv_gpu.hpp"

#include <cstdio>
#include <random>

#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/core/version.hpp"

namespace tessera::bench {
namespace {

using compute::Conv2dParams;
using core::Tensor;

/// One stride-1 square convolution on (n, cin, h, w).
struct GpuLayer {
  std::string name;
  int n, cin, h, w, cout, k, pad, groups;
  bool depthwise() const { return groups == cin && cin == cout && groups > 1; }
};

/// ConvNeXt-T stage 1 at 3x512x2048 (2, 96, 128, 512) and ConvNeXt-B stage 1 at 3x512x1024
/// (2, 128, 128, 256): the depthwise 7x7 and the pointwise pair of the first blocks.
std::vector<GpuLayer> gpu_layers() {
  return {{"dw7x7_p3", 2, 96, 128, 512, 96, 7, 3, 96},
          {"dw7x7_p3_b", 2, 128, 128, 256, 128, 7, 3, 128},
          {"pw_96to384", 2, 96, 128, 512, 384, 1, 0, 1},
          {"pw_384to96", 2, 384, 128, 512, 96, 1, 0, 1}};
}

/// Forwards every call to `inner` and adds up compute::op_cost (core's cost counters).
class CostCounter final : public compute::Backend {
 public:
  explicit CostCounter(compute::Backend& inner) : inner_(inner) {}
  std::string_view name() const noexcept override { return inner_.name(); }
  int num_threads() const noexcept override { return inner_.num_threads(); }
  void set_num_threads(int n) override { inner_.set_num_threads(n); }
  void execute(const compute::OpCall& call) override {
    const compute::OpCost c = compute::op_cost(call);
    flops += c.flops;
    bytes += double(c.bytes_read + c.bytes_written);
    inner_.execute(call);
  }
  std::shared_ptr<core::DeviceMemory> device_memory() override { return inner_.device_memory(); }
  void synchronize() override { inner_.synchronize(); }
  double flops = 0, bytes = 0;

 private:
  compute::Backend& inner_;
};

Tensor random_on(const core::Shape& s, unsigned seed, Gpu& gpu, core::MemCategory cat) {
  Tensor h = Tensor::empty(s);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  float* p = h.data<float>();
  for (std::int64_t i = 0; i < h.numel(); ++i) p[i] = dist(gen);
  return h.to(gpu.allocator, cat);
}

struct GpuRow {
  std::string layer, pass;
  Stats ms;  ///< per call
  int calls_per_batch = 1;
  double flops = 0, bytes = 0;
  double gflops() const { return flops / (ms.median * 1e-3) * 1e-9; }
  double bytes_per_s() const { return bytes / (ms.median * 1e-3); }
};

void measure_layer(const GpuConvOptions& o, const GpuLayer& l, Gpu& gpu, std::vector<GpuRow>& rows) {
  using core::MemCategory;
  Conv2dParams p;
  p.kernel_h = p.kernel_w = l.k;
  p.pad_h = p.pad_w = l.pad;
  p.groups = l.groups;
  Tensor x = random_on({l.n, l.cin, l.h, l.w}, 1, gpu, MemCategory::Activation);
  Tensor w = random_on({l.cout, l.cin / l.groups, l.k, l.k}, 2, gpu, MemCategory::Parameter);
  Tensor dy = random_on({l.n, l.cout, l.h, l.w}, 3, gpu, MemCategory::Activation);
  Tensor b = Tensor::zeros({l.cout}, core::DType::F32, MemCategory::Parameter, gpu.allocator);
  Tensor y = Tensor::empty({l.n, l.cout, l.h, l.w}, core::DType::F32, MemCategory::Activation, gpu.allocator);
  Tensor dx = Tensor::empty(x.shape(), core::DType::F32, MemCategory::Gradient, gpu.allocator);
  Tensor dw = Tensor::empty(w.shape(), core::DType::F32, MemCategory::Gradient, gpu.allocator);
  Tensor db = Tensor::empty({l.cout}, core::DType::F32, MemCategory::Gradient, gpu.allocator);
  auto fwd = [&](compute::Backend& be) { compute::conv2d_forward(be, p, x, w, &b, y); };
  auto fwd_bwd = [&](compute::Backend& be) {
    fwd(be);
    compute::conv2d_backward_weight(be, p, x, dy, dw, &db, false);
    compute::conv2d_backward_data(be, p, dy, w, dx, false);
  };
  for (int pass = 0; pass < 2; ++pass) {
    CostCounter counter(*gpu.backend);
    GpuRow r{l.name, pass == 0 ? "fwd" : "fwd+bwd", {}, 1, 0, 0};
    if (pass == 0) fwd(counter); else fwd_bwd(counter);  // one call counted (and warmed up)
    r.flops = counter.flops, r.bytes = counter.bytes;
    compute::Backend& be = *gpu.backend;
    const BatchedTiming t =
        pass == 0 ? time_batched_ms(be, o.warmup, o.reps, o.min_batch_ms, [&] { fwd(be); })
                  : time_batched_ms(be, o.warmup, o.reps, o.min_batch_ms, [&] { fwd_bwd(be); });
    r.ms = t.ms;
    r.calls_per_batch = t.calls_per_batch;
    rows.push_back(r);
  }
}

}  // namespace

int run_conv_gpu(const GpuConvOptions& o) {
  Gpu gpu = open_gpu(o.device, o.tf32, "bench_conv");
  if (!o.json) std::fprintf(stderr, "device-to-device copy bandwidth on %s...\n", gpu.description.c_str());
  const CopyBandwidth copy =
      measure_copy_bandwidth(gpu, o.copy_bytes, std::max(5, o.reps / 2), o.min_batch_ms);
  std::vector<GpuRow> rows;
  std::vector<GpuLayer> measured;
  for (const GpuLayer& l : gpu_layers()) {
    if (!o.layers.empty() && o.layers.find("," + l.name + ",") == std::string::npos) continue;
    if (!o.json) std::fprintf(stderr, "measuring %s on %s...\n", l.name.c_str(), o.device.c_str());
    measure_layer(o, l, gpu, rows);
    measured.push_back(l);
  }
  TESSERA_CHECK(!measured.empty(), "bench_conv --device cuda: --layers ", o.layers,
                " names none of dw7x7_p3, dw7x7_p3_b, pw_96to384, pw_384to96");
  const core::MemStats mem = gpu.allocator->stats();
  const std::string description = gpu.description;
  // Give the device memory back before the peer runs (allocator first: it returns its blocks).
  gpu.allocator.reset();
  gpu.memory.reset();
  gpu.backend.reset();

  // The peer: PyTorch's depthwise 7x7 forward + backward at each measured depthwise shape.
  struct PeerRow {
    std::string layer;
    Peer peer;
  };
  std::vector<PeerRow> peers;
  std::string no_peer;
  for (const GpuLayer& l : measured) {
    if (!l.depthwise()) continue;
    if (!o.peer) {
      no_peer = "--no-torch";
      break;
    }
    if (!o.json) std::fprintf(stderr, "PyTorch eager peer for %s...\n", l.name.c_str());
    Peer p = run_torch_peer(
        o.peer_command,
        {"--mode", "conv", "--shape",
         std::to_string(l.n) + "," + std::to_string(l.cin) + "," + std::to_string(l.h) + "," +
             std::to_string(l.w),
         "--steps", std::to_string(o.reps), "--warmup", std::to_string(o.warmup), "--min-batch-ms",
         std::to_string(o.min_batch_ms), "--tf32", o.tf32 ? "1" : "0", "--device",
         "cuda:" + std::to_string(cuda_device_index(o.device))});
    if (!p.ok && no_peer.empty()) no_peer = p.error;
    peers.push_back({l.name, std::move(p)});
  }
  auto peer_of = [&](const std::string& layer) -> const Peer* {
    for (const PeerRow& pr : peers)
      if (pr.layer == layer && pr.peer.ok) return &pr.peer;
    return nullptr;
  };
  const double copy_bw = copy.bytes_per_s;

  if (o.json) {
    std::vector<std::string> rs, ps;
    for (const GpuRow& r : rows) {
      Json j;
      j.str("layer", r.layer)
          .str("pass", r.pass)
          .stats("ms_", r.ms)
          .num("calls_per_batch", r.calls_per_batch)
          .num("gflops", r.gflops())
          .num("bytes", r.bytes)
          .num("gb_per_s", r.bytes_per_s() * 1e-9)
          .num("share_of_copy_bw", copy_bw > 0 ? r.bytes_per_s() / copy_bw : 0);
      if (const Peer* p = r.pass == "fwd+bwd" ? peer_of(r.layer) : nullptr)
        j.num("torch_ms_median", p->result["step_ms_median"].get<double>())
            .num("tessera_over_torch", r.ms.median / p->result["step_ms_median"].get<double>());
      rs.push_back(j.str());
    }
    for (const PeerRow& pr : peers) ps.push_back(Json().str("layer", pr.layer).raw("torch", peer_json(pr.peer)).str());
    Json top;
    top.str("tessera_version", std::string(core::version()))
        .str("build", core::build_description())
        .str("device", o.device)
        .str("device_description", description)
        .raw("tf32", o.tf32 ? "true" : "false")
        .str("timing", "cuda_events_batched")
        .num("min_batch_ms", o.min_batch_ms)
        .raw("copy_bandwidth", Json()
                                   .num("bytes", copy.bytes)
                                   .stats("ms_", copy.per_copy.ms)
                                   .num("calls_per_batch", copy.per_copy.calls_per_batch)
                                   .num("gb_per_s", copy_bw * 1e-9)
                                   .str())
        .num("target_share_dw7x7_fwd_bwd", 0.7)
        .raw("results", json_array(rs))
        .raw("torch", json_array(ps))
        .num("peak_total_mib", mem.peak_total / (1024.0 * 1024.0))
        .num("peak_reserved_mib", mem.peak_reserved / (1024.0 * 1024.0));
    if (!no_peer.empty()) top.str("peer", "not available (" + no_peer + ")");
    std::printf("%s\n", top.str().c_str());
    return no_peer.empty() ? 0 : kExitNoPeer;
  }
  std::printf("%s\n", core::version_line().c_str());
  std::printf(
      "convolutions on %s (tf32 %s): ms per call, median of %d batches of back-to-back calls "
      "(>= %.0f ms each, timed between CUDA events) after %d warm-up calls\ndevice-to-device copy "
      "(Tensor copy_from of %.0f MiB): %.3f ms, %.1f GB/s read + "
      "written\nbytes: read + written per core's cost counters (compute::op_cost); share: of the "
      "copy's GB/s (target for dw7x7 fwd+bwd: >= 70%%)\n\n%-11s %-8s %10s %21s %6s %9s %8s %6s "
      "%10s %6s\n",
      description.c_str(), o.tf32 ? "on" : "off", o.reps, o.min_batch_ms, o.warmup,
      copy.bytes / (1 << 20), copy.per_copy.ms.median, copy_bw * 1e-9, "layer", "pass", "median ms",
      "[min-max] ms", "calls", "GFLOP/s", "GB/s", "share", "torch ms", "ratio");
  for (const GpuRow& r : rows) {
    const Peer* p = r.pass == "fwd+bwd" ? peer_of(r.layer) : nullptr;
    const double tms = p ? p->result["step_ms_median"].get<double>() : 0;
    std::printf("%-11s %-8s %10.3f   [%8.3f - %8.3f] %6d %9.1f %8.1f %5.1f%% %10s %6s\n",
                r.layer.c_str(), r.pass.c_str(), r.ms.median, r.ms.min, r.ms.max, r.calls_per_batch,
                r.gflops(), r.bytes_per_s() * 1e-9,
                copy_bw > 0 ? 100 * r.bytes_per_s() / copy_bw : 0.0,
                p ? std::to_string(tms).substr(0, 7).c_str() : "-",
                p ? ratio_text(r.ms.median, tms).c_str() : "-");
  }
  if (!no_peer.empty()) {
    std::printf("peer: not available (%s)\n", no_peer.c_str());
    return kExitNoPeer;
  }
  if (!peers.empty())
    std::printf("PyTorch %s (cuDNN %s) on %s, eager, channels-last; ratio: tessera / PyTorch\n",
                json_text(peers.front().peer.result, "torch_version").c_str(),
                json_text(peers.front().peer.result, "cudnn").c_str(),
                json_text(peers.front().peer.result, "device_name").c_str());
  return 0;
}

}  // namespace tessera::bench
