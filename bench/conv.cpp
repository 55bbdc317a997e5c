// bench_conv: GFLOP/s of the ConvNeXt-T stage-1 convolutions on the cpu backend, next to the
// machine's measured FMA peak and (when built with it) libtorch on the same layers; then the
// same layers sharded along W over 1, 2 and 4 ranks of the in-process `local` comm backend, with
// the share of each rank's step spent in halo exchange. --device cuda: the same layers on the
// cuda compute backend beside the GPU's copy bandwidth and PyTorch eager (conv_gpu.cpp).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "blas_probe.hpp"
#include "conv_gpu.hpp"
#include "cpu_kernels.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/core/version.hpp"
#include "tessera/nn/conv2d.hpp"

#ifdef TESSERA_BENCH_HAVE_TORCH
#include "torch_peer.hpp"
#endif

namespace tessera::bench {
namespace {

using compute::Conv2dParams;
using core::Tensor;

struct Options {
  bool json = false;
  int reps = 7;
  std::vector<int> threads = {1, 2};
  std::string layers;  // comma-separated case names; empty = all
  bool torch = true;
  bool sharded = true;
  std::vector<int> ranks = {1, 2, 4};
  int sharded_h = 64;  // H of the sharded runs: half of 128, to keep the default run short
  std::string device = "cpu";  // cuda, cuda:N: conv_gpu.cpp with the options below
  bool reps_set = false;
  /// --precision bf16|fp16: every cpu row also with activations and their gradients in that
  /// dtype (f32 weights and weight gradients, as the trainer's mixed precision calls them).
  core::DType half = core::DType::F32;
  GpuConvOptions gpu;
};

/// One convolution layer (square kernel, stride 1).
struct Layer {
  int n, cin, h, w, cout, k, pad, groups;
  double fwd_flops() const { return 2.0 * n * cout * h * w * (cin / groups) * k * k; }
};

/// The measured layers: ConvNeXt-T stage 1 at (2, 96, 128, 512); "pw_pair" is 96→384→96 chained.
struct Case {
  std::string name;
  std::vector<Layer> chain;
  double fwd_flops() const {
    double f = 0;
    for (const auto& l : chain) f += l.fwd_flops();
    return f;
  }
};
std::vector<Case> cases() {
  return {{"dw7x7_p3", {{2, 96, 128, 512, 96, 7, 3, 96}}},
          {"pw_96to384", {{2, 96, 128, 512, 384, 1, 0, 1}}},
          {"pw_384to96", {{2, 384, 128, 512, 96, 1, 0, 1}}},
          {"pw_pair", {{2, 96, 128, 512, 384, 1, 0, 1}, {2, 384, 128, 512, 96, 1, 0, 1}}}};
}

struct Row {
  std::string name, impl, pass;
  std::string dtype;  // of the activations: f32, bf16, f16
  int threads;
  Stats ms;
  double gflops;
  std::string path;       // libtorch: ATen's convolution backend per layer ("Mkldnn", "Slow2d")
  int blas_threads = -1;  // libtorch: the BLAS's own thread count during the row (-1: unknown)
};

void fill_random(Tensor& t, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  Tensor f = t.dtype() == core::DType::F32 ? t : Tensor::empty(t.shape());
  float* p = f.data<float>();
  for (std::int64_t i = 0; i < f.numel(); ++i) p[i] = dist(gen);
  if (t.dtype() != core::DType::F32) {  // rounded once to t's dtype
    compute::cpu::CpuBackend be(1);
    compute::copy(be, f, t);
  }
}

// Activations and gradients of a chain of layers on the cpu backend, in `dt` (weights, bias and
// their gradients in f32, as mixed precision keeps them).
struct TesseraChain {
  std::vector<Layer> ls;
  std::vector<Conv2dParams> ps;
  std::vector<Tensor> act, grad, w, b, dw, db;  // act[i] feeds layer i; act.back() is the output

  TesseraChain(const std::vector<Layer>& layers, core::DType dt) : ls(layers) {
    act.push_back(Tensor::empty({ls[0].n, ls[0].cin, ls[0].h, ls[0].w}, dt));
    fill_random(act[0], 1);
    for (std::size_t i = 0; i < ls.size(); ++i) {
      const Layer& l = ls[i];
      Conv2dParams p;
      p.kernel_h = p.kernel_w = l.k;
      p.pad_h = p.pad_w = l.pad;
      p.groups = l.groups;
      ps.push_back(p);
      w.push_back(Tensor::empty({l.cout, l.cin / l.groups, l.k, l.k}));
      fill_random(w.back(), 10 + unsigned(i));
      b.push_back(Tensor::zeros({l.cout}));
      dw.push_back(Tensor::empty(w.back().shape()));
      db.push_back(Tensor::empty({l.cout}));
      act.push_back(Tensor::empty({l.n, l.cout, l.h, l.w}, dt));
    }
    for (const auto& a : act) grad.push_back(Tensor::empty(a.shape(), dt));
    fill_random(grad.back(), 2);
  }
  void forward(compute::Backend& be) {
    for (std::size_t i = 0; i < ls.size(); ++i)
      compute::conv2d_forward(be, ps[i], act[i], w[i], &b[i], act[i + 1]);
  }
  void forward_backward(compute::Backend& be) {
    forward(be);
    for (std::size_t i = ls.size(); i-- > 0;) {
      compute::conv2d_backward_weight(be, ps[i], act[i], grad[i + 1], dw[i], &db[i], false);
      compute::conv2d_backward_data(be, ps[i], grad[i + 1], w[i], grad[i], false);
    }
  }
};

#ifdef TESSERA_BENCH_HAVE_TORCH
// The same chain through at::conv2d and at::convolution_backward, NCHW or channels-last, on the
// backend ATen itself picks, as a libtorch user gets it: for a 1x1 conv with batch < 16 on one
// thread that is Slow2d (THNN, BLAS sgemm_; as fast as oneDNN on OpenBLAS), else oneDNN.
struct TorchChain {
  std::vector<Layer> ls;
  std::vector<at::Tensor> w, b;
  at::Tensor x, dy;
  at::MemoryFormat fmt;

  // `st`: the dtype of everything (libtorch's bf16 convolution takes bf16 weights, as under
  // torch.autocast).
  TorchChain(const std::vector<Layer>& layers, bool channels_last, at::ScalarType st = at::kFloat)
      : ls(layers),
        fmt(channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous) {
    at::manual_seed(0);
    const Layer& f = ls.front();
    const Layer& e = ls.back();
    x = at::rand({f.n, f.cin, f.h, f.w}).to(st).contiguous(fmt);
    dy = at::rand({e.n, e.cout, e.h, e.w}).to(st).contiguous(fmt);
    for (const Layer& l : ls) {
      w.push_back(at::rand({l.cout, l.cin / l.groups, l.k, l.k}).to(st).contiguous(fmt));
      b.push_back(at::zeros({l.cout}).to(st));
    }
  }
  at::Tensor conv(std::size_t i, const at::Tensor& in) const {
    const Layer& l = ls[i];
    return at::conv2d(in, w[i], b[i], {1, 1}, {l.pad, l.pad}, {1, 1}, l.groups);
  }
  /// ATen's choice of backend for each layer of the forward pass, as at::conv2d makes it now.
  std::string paths() const {
    std::vector<std::string> p;
    at::Tensor h = x;
    for (std::size_t i = 0; i < ls.size(); ++i) {
      const Layer& l = ls[i];
      p.push_back(conv2d_path(h, w[i], b[i], 1, l.pad, 1, l.groups));
      h = conv(i, h);
    }
    return join_paths(p);
  }
  void forward() {
    at::Tensor h = x;
    for (std::size_t i = 0; i < ls.size(); ++i) h = conv(i, h);
  }
  void forward_backward() {
    std::vector<at::Tensor> ins = {x};
    for (std::size_t i = 0; i < ls.size(); ++i) ins.push_back(conv(i, ins.back()));
    at::Tensor g = dy;
    for (std::size_t i = ls.size(); i-- > 0;) {
      const Layer& l = ls[i];
      auto grads =
          at::convolution_backward(g, ins[i], w[i], at::IntArrayRef{l.cout}, {1, 1}, {l.pad, l.pad},
                                   {1, 1}, false, {0, 0}, l.groups, {true, true, true});
      g = std::get<0>(grads);
    }
  }
};
#endif

// Times every implementation of one case and pass with their repetitions interleaved (A B C A B
// C ...), so that load from other processes on a shared machine hits all of them alike. A short
// pause before each run lets OpenMP threads that spin after a parallel region go to sleep.
// `peer_problem` collects the first reason the libtorch peer is not run as its users run it.
void measure(const Options& o, const Case& c, int threads, std::vector<Row>& rows,
             [[maybe_unused]] std::string& peer_problem) {
  struct Impl {
    std::string name, dtype;
    std::function<void()> fwd, fwd_bwd;
    std::string path;
  };
  int blas_threads = -1;
  std::vector<Impl> impls;
  compute::cpu::CpuBackend be(threads);
  TesseraChain tc(c.chain, core::DType::F32);
  impls.push_back({"tessera", "f32", [&] { tc.forward(be); }, [&] { tc.forward_backward(be); }, ""});
  std::unique_ptr<TesseraChain> th;
  if (o.half != core::DType::F32) {
    th = std::make_unique<TesseraChain>(c.chain, o.half);
    impls.push_back({"tessera", std::string(core::dtype_name(o.half)), [&] { th->forward(be); }, [&] { th->forward_backward(be); }, ""});
  }
#ifdef TESSERA_BENCH_HAVE_TORCH
  std::vector<std::unique_ptr<TorchChain>> torch;
  if (o.torch) {
    // "libtorch on T threads" means T in all: ATen's OpenMP pool and the BLAS's own threads,
    // which at::set_num_threads does not reach.
    at::set_num_threads(threads);
    blas_threads = set_blas_threads(threads);
    if (peer_problem.empty()) peer_problem = blas_peer_problem(probe_blas(), threads);
    std::vector<std::pair<std::string, at::ScalarType>> dts = {{"f32", at::kFloat}};
    if (o.half == core::DType::BF16) dts.emplace_back("bf16", at::kBFloat16);
    if (o.half == core::DType::F16) dts.emplace_back("f16", at::kHalf);
    for (const auto& [dn, st] : dts)
      for (bool cl : {false, true}) {
        torch.push_back(std::make_unique<TorchChain>(c.chain, cl, st));
        TorchChain* t = torch.back().get();
        impls.push_back({cl ? "torch_cl" : "torch_cf", dn, [t] { t->forward(); },
                         [t] { t->forward_backward(); }, t->paths()});
      }
  }
#endif
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<std::vector<double>> ms(impls.size());
    for (int rep = -1; rep < o.reps; ++rep)  // rep -1 warms up
      for (std::size_t i = 0; i < impls.size(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        auto& fn = pass == 0 ? impls[i].fwd : impls[i].fwd_bwd;
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        const double dt =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (rep >= 0) ms[i].push_back(dt);
      }
    const double flops = (pass == 0 ? 1 : 3) * c.fwd_flops();
    for (std::size_t i = 0; i < impls.size(); ++i) {
      const Stats s = stats_of(ms[i]);
      const bool torch = !impls[i].path.empty();
      rows.push_back({c.name, impls[i].name, pass == 0 ? "fwd" : "fwd+bwd", impls[i].dtype, threads, s,
                      flops / (s.median * 1e-3) * 1e-9, impls[i].path, torch ? blas_threads : -1});
    }
  }
}

// ---- Sharded runs ----------------------------------------------------------------------------
// The "dw7x7_p3" and "pw_pair" cases, at H = --sharded-h (default 64 rather than 128 to halve
// the run time; the halo/compute ratio of a W split does not depend on H), with the input
// (N, C, H, W) sharded along W (Shard(3) on a mesh "sp=P"), one thread per rank of
// comm::local, each rank on its own CpuBackend with max(1, 2/P) threads. A rep is: barrier,
// then on every rank the forward through the chain (nn::conv2d_forward with its halo plan), and
// for fwd+bwd the backward (nn::conv2d_backward, input gradients included) plus the all-reduce
// of dw and db over the sharded mesh dim. The rep's time is the slowest rank's. The sharded ops
// allocate their outputs on every call (as in training), so even 1 rank is slower than the
// unsharded rows, which reuse preallocated outputs: fresh pages cost page faults.
//
// Halo share: conv2d_forward/backward return in nn::Conv2dTimes::exchange_s the wall time the
// rank spent inside HaloExchange (assembling the input-with-halo buffer, packing and posting the
// batch_p2p, then waiting for it and unpacking), timed around those calls by the library itself.
// With overlap on (the default, as in training) the interior outputs are computed between post
// and wait, so this is the halo cost the rank actually sees, waiting on a slower neighbour
// included. halo_share = median over reps of (sum over ranks of exchange_s) / (sum over ranks of
// the rank's step time). 1x1 convs need no halos, so pw_pair shows 0; 1 rank exchanges nothing.

struct ShardedRow {
  std::string layer, pass;
  int ranks, threads, h;
  Stats ms;
  double halo_share;
};

ShardedRow measure_sharded(const Options& o, Case c, int P, bool backward) {
  for (Layer& l : c.chain) l.h = o.sharded_h;
  const int threads = std::max(1, 2 / P);
  const core::DeviceMesh mesh({P}, {"sp"});
  std::vector<nn::ConvSpec> specs;
  std::vector<core::Layout> lays;  // lays[i] = input layout of layer i; lays.back() = output
  const Layer& l0 = c.chain.front();
  lays.emplace_back(mesh, core::Shape{l0.n, l0.cin, l0.h, l0.w},
                    std::vector<core::Placement>{core::Shard(3)});
  for (const Layer& l : c.chain) {
    specs.push_back(nn::ConvSpec::square(l.cin, l.cout, l.k, 1, l.pad, 1, l.groups, true));
    lays.push_back(nn::conv_output_layout(specs.back(), lays.back()));
  }
  // [rep][rank]: step seconds and halo-exchange seconds (rep -1, the warm-up, is not stored).
  std::vector<std::vector<double>> step_s(o.reps, std::vector<double>(P)), halo_s = step_s;

  comm::local::run(P, [&](comm::Backend& world) {
    const int rank = world.rank();
    comm::MeshComm meshc(mesh, world);
    compute::cpu::CpuBackend cpu(threads);
    const nn::RankContext ctx{&world, &cpu, std::make_shared<core::Allocator>("bench")};
    std::vector<nn::HaloPlan> plans;
    std::vector<Tensor> w, b;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      plans.push_back(nn::make_halo_plan(specs[i], lays[i], lays[i + 1], rank));
      w.push_back(Tensor::empty(specs[i].weight_shape()));
      fill_random(w.back(), 10 + unsigned(i));  // same weights on every rank
      b.push_back(Tensor::zeros({specs[i].out_channels}));
    }
    Tensor x = Tensor::empty(lays.front().local_shape(rank));
    Tensor dy = Tensor::empty(lays.back().local_shape(rank));
    fill_random(x, 1 + 100 * unsigned(rank));
    fill_random(dy, 2 + 100 * unsigned(rank));
    std::vector<nn::Conv2dSaved> saved(specs.size());

    for (int rep = -1; rep < o.reps; ++rep) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      world.barrier();
      double halo = 0;
      nn::Conv2dTimes t;
      const auto t0 = std::chrono::steady_clock::now();
      Tensor h = x;
      for (std::size_t i = 0; i < specs.size(); ++i) {
        h = nn::conv2d_forward(plans[i], ctx, h, w[i], &b[i], backward ? &saved[i] : nullptr, {},
                               &t);
        halo += t.exchange_s;
      }
      if (backward) {
        Tensor g = dy;
        for (std::size_t i = specs.size(); i-- > 0;) {
          nn::Conv2dGrads gr =
              nn::conv2d_backward(plans[i], ctx, saved[i], w[i], g, true, true, {}, &t);
          halo += t.exchange_s;
          meshc.all_reduce(gr.dw, plans[i].grad_reduce_mesh_dims);
          meshc.all_reduce(gr.db, plans[i].grad_reduce_mesh_dims);
          g = gr.dx;
        }
      }
      const double dt =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rep >= 0) step_s[rep][rank] = dt, halo_s[rep][rank] = halo;  // own slot: no lock
    }
  });

  std::vector<double> ms, share;
  for (int r = 0; r < o.reps; ++r) {
    double worst = 0, sum_step = 0, sum_halo = 0;
    for (int q = 0; q < P; ++q) {
      worst = std::max(worst, step_s[r][q]);
      sum_step += step_s[r][q];
      sum_halo += halo_s[r][q];
    }
    ms.push_back(1e3 * worst);
    share.push_back(sum_step > 0 ? sum_halo / sum_step : 0);
  }
  const std::string pass = backward ? "fwd+bwd" : "fwd";
  return {c.name, pass, P, threads, o.sharded_h, stats_of(ms), stats_of(share).median};
}

/// Measures every sharded configuration (none with --no-sharded).
std::vector<ShardedRow> run_sharded(const Options& o) {
  std::vector<ShardedRow> rows;
  if (!o.sharded) return rows;
  for (const Case& c : cases()) {
    if (c.name != "dw7x7_p3" && c.name != "pw_pair") continue;
    if (!o.layers.empty() && o.layers.find("," + c.name + ",") == std::string::npos) continue;
    for (bool bwd : {false, true})
      for (int P : o.ranks) {
        if (!o.json)
          std::fprintf(stderr, "measuring %s %s sharded over %d rank(s)...\n", c.name.c_str(),
                       bwd ? "fwd+bwd" : "fwd", P);
        rows.push_back(measure_sharded(o, c, P, bwd));
      }
  }
  return rows;
}

std::string sharded_json(const ShardedRow& r) {
  return Json()
      .str("layer", r.layer)
      .str("pass", r.pass)
      .num("ranks", r.ranks)
      .num("threads_per_rank", r.threads)
      .num("h", r.h)
      .num("ms_median", r.ms.median)
      .num("ms_min", r.ms.min)
      .num("ms_max", r.ms.max)
      .num("halo_share", r.halo_share)
      .str();
}

void print_sharded(const std::vector<ShardedRow>& rows, int h) {
  if (rows.empty()) return;
  std::printf(
      "\nsharded along W on the local comm backend, N=2 C=96 H=%d W=512 (threads/rank = max(1,\n"
      "2/ranks); time of the slowest rank per rep; halo = share of rank time in halo exchange)\n"
      "note: this machine has 2 cores, so more ranks show the overhead of sharding, not a "
      "speed-up\n%-11s %-8s %5s %4s %10s %21s %7s\n",
      h, "layer", "pass", "ranks", "thr", "median ms", "[min-max] ms", "halo");
  for (const ShardedRow& r : rows)
    std::printf("%-11s %-8s %5d %4d %10.2f   [%8.2f - %8.2f] %6.1f%%\n", r.layer.c_str(),
                r.pass.c_str(), r.ranks, r.threads, r.ms.median, r.ms.min, r.ms.max,
                100 * r.halo_share);
}

const Row* find(const std::vector<Row>& rows, const std::string& name, const std::string& impl,
                const std::string& pass, int threads, const std::string& dtype = "f32") {
  for (const Row& r : rows)
    if (r.name == name && r.impl == impl && r.pass == pass && r.threads == threads && r.dtype == dtype) return &r;
  return nullptr;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      o.json = true;
    } else if (a == "--no-torch") {
      o.torch = false;
    } else if (a == "--no-sharded") {
      o.sharded = false;
    } else if (a == "--sharded-h" && i + 1 < argc) {
      o.sharded_h = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--ranks" && i + 1 < argc) {
      o.ranks.clear();
      for (const char* s = argv[++i]; *s; s += (*s == ','))
        o.ranks.push_back(std::max(1, int(std::strtol(s, const_cast<char**>(&s), 10))));
    } else if (a == "--layers" && i + 1 < argc) {
      o.layers = std::string(",") + argv[++i] + ",";
    } else if (a == "--reps" && i + 1 < argc) {
      o.reps = std::max(1, std::atoi(argv[++i]));
      o.reps_set = true;
    } else if (a == "--device" && i + 1 < argc) {
      o.device = argv[++i];
    } else if (a == "--tf32") {
      o.gpu.tf32 = true;
    } else if (a == "--warmup" && i + 1 < argc) {
      o.gpu.warmup = std::max(0, std::atoi(argv[++i]));
    } else if (a == "--copy-mib" && i + 1 < argc) {
      o.gpu.copy_bytes = std::max(1, std::atoi(argv[++i])) * double(1 << 20);
    } else if (a == "--peer-script" && i + 1 < argc) {
      o.gpu.peer_command.script = argv[++i];
    } else if (a == "--python" && i + 1 < argc) {
      o.gpu.peer_command.python = argv[++i];
    } else if (a == "--precision" && i + 1 < argc) {
      const std::string pr = argv[++i];
      if (pr == "bf16") {
        o.half = core::DType::BF16;
      } else if (pr == "fp16" || pr == "f16") {
        o.half = core::DType::F16;
      } else if (pr != "fp32") {
        std::fprintf(stderr, "bench_conv: --precision %s: use fp32, bf16 or fp16\n", pr.c_str());
        std::exit(2);
      }
    } else if (a == "--threads" && i + 1 < argc) {
      o.threads.clear();
      for (const char* s = argv[++i]; *s; s += (*s == ','))
        o.threads.push_back(int(std::strtol(s, const_cast<char**>(&s), 10)));
    } else {
      std::fprintf(
          stderr,
          "usage: bench_conv [--json] [--reps N] [--threads 1,2] [--layers dw7x7_p3,pw_pair]\n"
          "                  [--no-torch] [--no-sharded] [--ranks 1,2,4] [--sharded-h 64]\n"
          "                  [--device cpu|cuda|cuda:N] [--tf32] [--warmup N] [--copy-mib 1024]\n"
          "                  [--peer-script FILE] [--python EXE] [--precision bf16|fp16]\n"
          "  GFLOP/s of the ConvNeXt-T stage-1 convolutions (--layers: dw7x7_p3, pw_96to384,\n"
          "      pw_384to96, pw_pair) on the cpu backend, forward and forward+backward, on\n"
          "      --threads threads, beside the FMA peak and libtorch at::conv2d NCHW and NHWC\n"
          "      (--no-torch: without it); median [min-max] of --reps runs (default 7)\n"
          "  then dw7x7_p3 and pw_pair sharded along W over --ranks ranks of the local comm\n"
          "      backend at H = --sharded-h (default 64), with the share of the step in halo\n"
          "      exchange (--no-sharded: skip these rows)\n"
          "  --json: one JSON object on stdout instead of the table\n"
          "  --precision bf16|fp16: every cpu row also with 16-bit activations and gradients\n"
          "      (f32 weights), beside f32, with the time ratio 16-bit / f32 and the CPU's\n"
          "      measured bf16 dot-product (VDPBF16PS) peak beside its FMA peak\n"
          "  --device cuda: the layers dw7x7_p3, dw7x7_p3_b, pw_96to384, pw_384to96 on the cuda\n"
          "      compute backend (--reps default 20 after --warmup 3), bytes/s as a share of a\n"
          "      device-to-device copy of --copy-mib MiB, beside PyTorch eager's depthwise conv\n"
          "      (--peer-script, default bench/torch_gpu_peer.py, run with --python, python3);\n"
          "      --tf32: TF32 for fp32 convolutions on both sides; these rows run in fp32;\n"
          "      --threads, --ranks, --sharded-h, --precision do not apply\n"
          "exit status 3: figures printed, but no ratio, because libtorch runs on the\n"
          "reference BLAS or a single-threaded one (bench/README.md); 4 (--device cuda):\n"
          "tessera's figures printed, the PyTorch peer not available; 1: an error (no GPU)\n");
      std::exit(a == "--help" ? 0 : 2);
    }
  }
  return o;
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.device != "cpu") {
    GpuConvOptions g = o.gpu;
    g.json = o.json;
    g.device = o.device;
    g.layers = o.layers;
    g.peer = o.torch;
    if (o.reps_set) g.reps = o.reps;
    cuda_device_index(g.device);  // a clear error for a --device that is neither cpu nor cuda[:N]
    return run_conv_gpu(g);
  }
  std::vector<std::pair<int, Stats>> peak, bf16_peak;
  for (int t : o.threads) {
    std::vector<double> g, h;
    for (int r = 0; r < 5; ++r) {
      g.push_back(fma_peak_gflops(t));
      if (o.half != core::DType::F32 && have_avx512_bf16()) h.push_back(bf16_dot_peak_gflops(t));
    }
    peak.emplace_back(t, stats_of(g));
    if (!h.empty()) bf16_peak.emplace_back(t, stats_of(h));
  }
  bool have_torch = false;
  std::string peer_line, peer_json = "null", peer_problem;
#ifdef TESSERA_BENCH_HAVE_TORCH
  const TorchPeer peer = o.torch ? torch_peer() : TorchPeer{};
  have_torch = o.torch;
#endif
  std::vector<Row> rows;
  for (const Case& c : cases())
    for (int t : o.threads) {
      if (!o.layers.empty() && o.layers.find("," + c.name + ",") == std::string::npos) continue;
      if (!o.json) std::fprintf(stderr, "measuring %s on %d thread(s)...\n", c.name.c_str(), t);
      measure(o, c, t, rows, peer_problem);
    }
#ifdef TESSERA_BENCH_HAVE_TORCH
  if (have_torch) peer_line = describe(peer), peer_json = torch_peer_json(peer, peer_problem);
#endif
  const std::vector<ShardedRow> sharded = run_sharded(o);

  // tessera time / libtorch time per case, pass and threads (< 1: tessera is faster).
  struct Ratio {
    std::string name, pass;
    int threads;
    double cf, cl;
  };
  std::vector<Ratio> ratios;
  // tessera in 16 bits / tessera in f32, and / libtorch in the same 16-bit dtype.
  struct HalfRatio {
    std::string name, pass;
    int threads;
    double over_f32, over_torch_cf, over_torch_cl;  // < 0: not measured
  };
  std::vector<HalfRatio> half_ratios;
  const std::string half_name(core::dtype_name(o.half));
  for (const Row& r : rows) {
    if (r.impl != "tessera" || r.dtype == "f32") continue;
    const Row* f = find(rows, r.name, "tessera", r.pass, r.threads);
    const Row* cf = peer_problem.empty() ? find(rows, r.name, "torch_cf", r.pass, r.threads, r.dtype) : nullptr;
    const Row* cl = peer_problem.empty() ? find(rows, r.name, "torch_cl", r.pass, r.threads, r.dtype) : nullptr;
    half_ratios.push_back({r.name, r.pass, r.threads, f ? r.ms.median / f->ms.median : -1,
                           cf ? r.ms.median / cf->ms.median : -1, cl ? r.ms.median / cl->ms.median : -1});
  }
  for (const Row& r : rows) {
    if (r.impl != "tessera" || r.dtype != "f32" || !peer_problem.empty()) continue;  // no ratio against a bad peer
    const Row* cf = find(rows, r.name, "torch_cf", r.pass, r.threads);
    const Row* cl = find(rows, r.name, "torch_cl", r.pass, r.threads);
    if (cf && cl)
      ratios.push_back(
          {r.name, r.pass, r.threads, r.ms.median / cf->ms.median, r.ms.median / cl->ms.median});
  }

  if (o.json) {
    std::vector<std::string> pk, rs, ra, sh;
    for (const ShardedRow& r : sharded) sh.push_back(sharded_json(r));
    for (auto& [t, s] : peak) pk.push_back(Json().num("threads", t).stats("gflops_", s).str());
    std::vector<std::string> bk, hr;
    for (auto& [t, s] : bf16_peak) bk.push_back(Json().num("threads", t).stats("gflops_", s).str());
    for (const HalfRatio& r : half_ratios) {
      Json j;
      j.str("layer", r.name).str("pass", r.pass).num("threads", r.threads).str("dtype", half_name);
      if (r.over_f32 > 0) j.num("time_over_f32", r.over_f32);
      if (r.over_torch_cf > 0) j.num("tessera_over_torch_cf", r.over_torch_cf);
      if (r.over_torch_cl > 0) j.num("tessera_over_torch_cl", r.over_torch_cl);
      hr.push_back(j.str());
    }
    for (const Row& r : rows) {
      Json j;
      j.str("layer", r.name)
          .str("impl", r.impl)
          .str("dtype", r.dtype)
          .str("pass", r.pass)
          .num("threads", r.threads)
          .stats("ms_", r.ms)
          .num("gflops", r.gflops);
      if (!r.path.empty()) j.str("torch_path", r.path).num("blas_threads", r.blas_threads);
      rs.push_back(j.str());
    }
    for (const Ratio& r : ratios)
      ra.push_back(Json()
                       .str("layer", r.name)
                       .str("pass", r.pass)
                       .num("threads", r.threads)
                       .num("tessera_over_torch_cf", r.cf)
                       .num("tessera_over_torch_cl", r.cl)
                       .str());
    std::printf("%s\n", Json()
                            .str("tessera_version", std::string(core::version()))
                            .str("build", core::build_description())
                            .raw("onednn", onednn_json())
                            .raw("fma_peak", json_array(pk))
                            .raw("bf16_dot_peak", json_array(bk))
                            .raw("half_ratios", json_array(hr))
                            .raw("results", json_array(rs))
                            .raw("ratios", json_array(ra))
                            .raw("sharded", json_array(sh))
                            .raw("torch_peer", peer_json)
                            .str()
                            .c_str());
    return peer_problem.empty() ? 0 : kExitPeerMisconfigured;
  }
  std::printf("%s\n%s\n", core::version_line().c_str(), cpu_kernels_line().c_str());
  if (have_torch) {
    std::string set;  // what the BLAS reported after set_blas_threads, per thread count
    for (int t : o.threads)
      for (const Row& r : rows)
        if (r.threads == t && !r.path.empty()) {
          set += (set.empty() ? "" : ", ") + std::to_string(t) + " -> " +
                 (r.blas_threads < 0 ? "?" : std::to_string(r.blas_threads));
          break;
        }
    std::printf(
        "%s\nlibtorch rows: ATen's and the BLAS's threads both set to the row's thr (BLAS "
        "reports %s)\n\n",
        peer_line.c_str(), set.c_str());
  }
  std::printf("fp32 FMA peak (GFLOP/s, median [min-max] of 5):");
  for (auto& [t, s] : peak)
    std::printf("  %d thread(s) %.1f [%.1f-%.1f]", t, s.median, s.min, s.max);
  if (o.half != core::DType::F32) {
    if (bf16_peak.empty()) {
      std::printf("\nbf16 dot-product peak: this CPU has no AVX512_BF16");
    } else {
      std::printf("\nbf16 dot-product peak (VDPBF16PS, GFLOP/s, median [min-max] of 5):");
      for (auto& [t, s] : bf16_peak) std::printf("  %d thread(s) %.1f [%.1f-%.1f]", t, s.median, s.min, s.max);
    }
  }
  std::printf("\n\n%-11s %-8s %3s %-9s %-5s %10s %21s %8s %6s  %s\n", "layer", "pass", "thr", "impl", "dtype",
              "median ms", "[min-max] ms", "GFLOP/s", "%peak", have_torch ? "libtorch path" : "");
  for (const Row& r : rows) {
    double pk = 0;
    for (auto& [t, s] : peak)
      if (t == r.threads) pk = s.median;
    std::printf("%-11s %-8s %3d %-9s %-5s %10.2f   [%8.2f - %8.2f] %8.1f %5.1f%%  %s\n", r.name.c_str(),
                r.pass.c_str(), r.threads, r.impl.c_str(), r.dtype.c_str(), r.ms.median, r.ms.min, r.ms.max,
                r.gflops, pk > 0 ? 100 * r.gflops / pk : 0.0, r.path.c_str());
  }
  if (!ratios.empty()) {
    std::printf("\ntime ratio tessera / libtorch (< 1: tessera faster)\n%-11s %-8s %3s %9s %9s\n",
                "layer", "pass", "thr", "vs NCHW", "vs NHWC");
    for (const Ratio& r : ratios)
      std::printf("%-11s %-8s %3d %9.2f %9.2f\n", r.name.c_str(), r.pass.c_str(), r.threads, r.cf,
                  r.cl);
  }
  if (!half_ratios.empty()) {
    std::printf("\ntime ratio of tessera in %s (< 1: faster) to tessera in f32 and to libtorch in %s\n"
                "%-11s %-8s %3s %9s %9s %9s\n",
                half_name.c_str(), half_name.c_str(), "layer", "pass", "thr", "vs f32", "vs NCHW", "vs NHWC");
    auto cell = [](double v) {  // "-": not measured
      char b[16];
      if (v > 0)
        std::snprintf(b, sizeof b, "%9.2f", v);
      else
        std::snprintf(b, sizeof b, "%9s", "-");
      return std::string(b);
    };
    for (const HalfRatio& r : half_ratios)
      std::printf("%-11s %-8s %3d %s %s %s\n", r.name.c_str(), r.pass.c_str(), r.threads, cell(r.over_f32).c_str(),
                  cell(r.over_torch_cf).c_str(), cell(r.over_torch_cl).c_str());
  }
  if (!peer_problem.empty())
    std::printf("\nno time ratio against libtorch: %s\n", peer_problem.c_str());
  print_sharded(sharded, o.sharded_h);
  return peer_problem.empty() ? 0 : kExitPeerMisconfigured;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  return tessera::bench::run_main("bench_conv", tessera::bench::run, argc, argv);
}
