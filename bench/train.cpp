// bench_train: training-step time of a ConvNeXt (default ConvNeXt-T, input 3x256x1024, batch 2,
// 4 classes, AdamW) on the synthetic dataset, sharded along W over P = 1, 2, 4 ranks of the
// in-process `local` comm backend (mesh "sp=P"), without and with per-block activation
// checkpointing. Each rank runs an nn::Trainer on its own CpuBackend with max(1, 2/P) threads.
// Per configuration: one warm-up step, then --steps timed steps; a step's time is the slowest
// rank's StepStats::step_time_s (data loading, forward, backward, gradient all-reduce, optimizer);
// reported as median [min-max], with images/s from the median, and each rank's allocator peak
// (total and activations) over all steps of the run, in MiB.
// With libtorch (TESSERA_BENCH_HAVE_TORCH), the same ConvNeXt built with torch::nn (NCHW fp32)
// times its forward + backward + AdamW step on 2 threads at the same input and batch (two
// warm-up steps, then --steps timed ones), and the table gives the ratio tessera (P=1) /
// libtorch. Its pointwise layers are 1x1 convolutions on NCHW (oneDNN; timm's conv_mlp form),
// the faster of libtorch's two forms here (3x256x1024 on 2 threads with OpenBLAS: ~3.5-4.0 s
// against ~4.8-5.1 s). --torch-linear times them as nn::Linear over channels, as in the
// reference implementation: ATen runs those as BLAS sgemm_ (~87 s per step on Debian's
// reference BLAS), which is why the ratio is refused without a real BLAS (blas_probe.hpp).
// libtorch is timed in forms (TorchForm): fp32 NCHW (the ratio above) and fp32 channels-last, and
// with --precision bf16 both again with the forward and loss under CPU autocast in bf16 (f32
// master weights, AdamW, the autocast cache dropped each step as torch.autocast's exit does).
// The table and --json then give issue 37's ratios (train_targets.hpp), each naming its two rows:
// tessera bf16 / fp32, and libtorch's faster form over tessera in fp32 and in bf16.
// --precision bf16|fp16 runs every configuration a second time in that mixed precision (f32
// master weights, 16-bit activations and halos) and prints its step-time, activation-peak and
// total-peak ratios to the fp32 run beside it. --overlap both runs every configuration with P > 1
// also with overlap off (halo exchange and bucket all-reduces waited for before compute goes on)
// and prints its step-time ratio to overlap on.
// Every run is traced (core::TracingComm and TracingCompute over each rank's backends; they cost
// well under 1% of a step here), and its trace gives, per rank and step, the halo exchanges and
// the bytes they send, the collectives and their bytes, the time the rank waited in Work::wait,
// the time the collectives' data moved (Work::moved: local moves it in the last rank's post) and
// how much of that, and of the halo events, lay under the rank's compute events (0 with
// TESSERA_LOCAL_PROGRESS=calls, where every rank waits in its post).
// --mesh SPEC trains every run on that mesh instead of sp=P, --micro-batches M,.. each with M
// micro-batches; on a mesh with a dim pp (pipeline stages), in each --schedule, with the pipeline
// figures of train_pipeline.hpp per stage (bubble measured and simulated, activation bound).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "blas_probe.hpp"
#include "cpu_kernels.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/core/tracing.hpp"
#include "tessera/core/version.hpp"
#include "tessera/nn/trainer.hpp"
#include "tessera/run/resolve.hpp"
#include "tessera/run/simulate.hpp"
#include "tessera/sim/calibrate.hpp"
#include "train_args.hpp"
#include "train_gpu.hpp"
#include "train_pipeline.hpp"
#include "train_targets.hpp"

#ifdef TESSERA_BENCH_HAVE_TORCH
#include <ATen/autocast_mode.h>
#include <torch/nn.h>
#include <torch/optim/adamw.h>

#include "torch_peer.hpp"
#endif

namespace tessera::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

/// Compute threads of each of P ranks: the 2 cores shared out, at least one.
int threads_for(int P) { return std::max(1, 2 / P); }

/// Communication of one step as its trace shows it, averaged over ranks (comm_figures).
struct CommFigures {
  double halo_exchanges = 0, halo_mib = 0;  // batch_p2p calls, MiB sent
  double collectives = 0, collective_mib = 0;
  double wait_ms = 0;             // inside Work::wait
  double collective_ms = 0;       // collective events' time (when their data moved)
  double coll_under_compute_ms = 0;  // of which under this rank's compute events
  double halo_under_compute_ms = 0;  // halo events' time under compute events
};

// Per rank: the union of its compute events' spans, then each comm/halo event's overlap with it.
CommFigures comm_figures(const std::vector<core::TraceEvent>& events, const std::vector<int>& ranks, int steps) {
  CommFigures f;
  for (int r : ranks) {
    std::vector<std::pair<double, double>> compute;
    std::vector<double> batches;
    for (const core::TraceEvent& e : events) {
      if (e.pid != r || e.ph != 'X') continue;
      if (e.cat == "compute") compute.emplace_back(e.ts_us, e.ts_us + e.dur_us);
      if (e.cat == "halo" && e.name == "send") {
        f.halo_mib += double(e.bytes) / kMiB;
        batches.push_back(e.ts_us);  // the sends of one batch share its post time
      }
      if (e.cat == "comm") {
        ++f.collectives;
        f.collective_mib += double(std::max<std::int64_t>(e.bytes, 0)) / kMiB;
        f.collective_ms += e.dur_us * 1e-3;
      }
      if (e.cat == "wait") f.wait_ms += e.dur_us * 1e-3;
    }
    std::sort(batches.begin(), batches.end());
    f.halo_exchanges += double(std::unique(batches.begin(), batches.end()) - batches.begin());
    std::sort(compute.begin(), compute.end());
    std::vector<std::pair<double, double>> merged;
    for (const auto& iv : compute)
      if (!merged.empty() && iv.first <= merged.back().second)
        merged.back().second = std::max(merged.back().second, iv.second);
      else
        merged.push_back(iv);
    for (const core::TraceEvent& e : events) {
      if (e.pid != r || e.ph != 'X' || (e.cat != "comm" && e.cat != "halo")) continue;
      const double a = e.ts_us, b = e.ts_us + e.dur_us;
      double& under = e.cat == "comm" ? f.coll_under_compute_ms : f.halo_under_compute_ms;
      for (const auto& [c0, c1] : merged) under += std::max(0.0, std::min(b, c1) - std::max(a, c0)) * 1e-3;
    }
  }
  const double n = double(ranks.size()) * steps;
  for (double* v : {&f.halo_exchanges, &f.halo_mib, &f.collectives, &f.collective_mib, &f.wait_ms, &f.collective_ms,
                    &f.coll_under_compute_ms, &f.halo_under_compute_ms})
    *v /= n;
  return f;
}

struct Run {
  int ranks = 0, threads = 0;
  std::string mesh;  // "sp=P", or --mesh
  int micro_batches = 1;
  std::string schedule;                 // with a pp dim: "1f1b" or "gpipe"; else ""
  std::optional<PipelineFigures> pipe;  // with a pp dim
  std::string checkpointing, precision;
  bool overlap = true;
  std::string halos;  // halo recompute with checkpointing (keep, exchange), "-" without
  Stats ms;                               // step time, slowest rank
  Stats compute_ms;                       // step time less data loading, slowest rank
  std::vector<double> step_ms, compute_step_ms;  // their samples (the timed steps of every round)
  bool overlaps_compute = false;          // the comm backend's Capabilities::overlaps_compute
  Stats sim;                              // the calibrated simulations' iteration (reps 0: none)
  std::vector<double> sim_ms;             // its samples, one per round
  // Per round (--simulate: a calibration, then this run's steps): its prediction over the
  // round's measured median step less loading, minus 1.
  std::vector<double> sim_errors;
  std::string sim_note;                   // how the calibration differs from the run, if it does
  std::vector<double> peak_mib, act_mib;  // per rank
  std::array<double, core::kNumMemCategories> category_mib{};  // peak per category, max over ranks
  CommFigures comm;                       // per rank and step, averaged over ranks
};

nn::TrainOptions train_options(const TrainBenchOptions& o, const std::string& checkpointing,
                               const std::string& precision, bool overlap,
                               const std::string& halos) {
  nn::TrainOptions t;
  t.model = nn::model_preset(o.model);
  t.model.num_classes = o.classes;
  t.model.in_channels = int(o.input[0]);
  t.input = o.input;
  t.batch = o.batch;
  t.shard = "W";
  t.checkpointing = checkpointing;
  t.steps = 1 + o.steps;
  t.precision = *nn::parse_precision(precision);
  t.overlap = overlap;
  if (halos != "-") t.halo_recompute = *nn::parse_halo_recompute(halos);
  t.micro_batches = o.micro_batches.front();
  t.schedule = *nn::parse_pipeline_schedule(o.schedules.front());
  return t;
}

/// `o` for one run of M micro-batches in `schedule` (train_options reads the first of each).
TrainBenchOptions one_run(TrainBenchOptions o, int M, const std::string& schedule) {
  o.micro_batches = {M};
  o.schedules = {schedule};
  return o;
}

/// The runs' mesh with P ranks: --mesh, else "sp=P".
std::string mesh_of(const TrainBenchOptions& o, int P) {
  return o.mesh.empty() ? "sp=" + std::to_string(P) : o.mesh;
}

/// "none", "block/keep", "block/exchange".
std::string ckpt_label(const Run& r) { return r.halos == "-" ? r.checkpointing : r.checkpointing + "/" + r.halos; }

/// ckpt_label, then the mesh (when not sp=P), the micro-batches (when more than one) and the
/// schedule (with a pipeline): "none pp=2 M=4 1f1b".
std::string run_label(const Run& r) {
  std::string s = ckpt_label(r);
  if (r.mesh != "sp=" + std::to_string(r.ranks)) s += " " + r.mesh;
  if (r.micro_batches > 1) s += " M=" + std::to_string(r.micro_batches);
  if (!r.schedule.empty()) s += " " + r.schedule;
  return s;
}

/// Whether q ran on r's mesh with r's micro-batches and schedule.
bool same_pipeline(const Run& q, const Run& r) {
  return q.mesh == r.mesh && q.micro_batches == r.micro_batches && q.schedule == r.schedule;
}

/// Every process's per-rank pipeline samples (each filled only its own rank's slots, all >= 0).
void gather_pipeline(PipelineFigures& p, comm::Backend& job) {
  std::vector<double> v;
  for (const auto* table : {&p.wait_s, &p.step_s})
    for (const std::vector<double>& step : *table) v.insert(v.end(), step.begin(), step.end());
  job.all_reduce({v.data(), v.size(), core::DType::F64}, comm::ReduceOp::Max)->wait();
  std::size_t k = 0;
  for (auto* table : {&p.wait_s, &p.step_s})
    for (std::vector<double>& step : *table)
      for (double& x : step) x = v[k++];
}

// `job`: this process's rank of a multi-process job (TrainBenchOptions::backend), or null for P
// local ranks.
Run measure(const TrainBenchOptions& o, int P, const std::string& checkpointing,
            const std::string& precision, bool overlap, const std::string& halos,
            comm::Backend* job) {
  const nn::TrainOptions t = train_options(o, checkpointing, precision, overlap, halos);
  const std::shared_ptr<const data::Dataset> ds = synthetic_data(o.input, o.classes);
  const core::DeviceMesh mesh = core::DeviceMesh::parse(mesh_of(o, P));
  Run r;
  r.ranks = P, r.threads = threads_for(P), r.checkpointing = checkpointing, r.precision = precision;
  r.mesh = mesh.to_string(), r.micro_batches = t.micro_batches;
  if (has_pipeline(mesh)) {
    r.schedule = o.schedules.front();
    r.pipe = pipeline_figures(mesh, t.micro_batches, r.schedule, o.steps);
  }
  r.overlap = overlap, r.halos = halos;
  r.peak_mib.assign(P, 0.0);
  r.act_mib.assign(P, 0.0);
  core::TraceRecorder recorder;
  std::mutex mu;
  std::vector<std::vector<double>> step_s(t.steps, std::vector<double>(P));  // [step][rank]
  std::vector<std::vector<double>> compute_s(t.steps, std::vector<double>(P));  // less data loading

  auto rank_fn = [&](comm::Backend& world) {
        const int rank = world.rank();
        if (rank == 0) r.overlaps_compute = world.capabilities().overlaps_compute;
        const core::TraceTarget target{&recorder, rank, mesh.coords_of(rank), nullptr, nullptr};
        core::TracingComm traced_world(world, target);
        comm::MeshComm mc(mesh, traced_world);
        auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(rank));
        compute::cpu::CpuBackend cpu(r.threads);
        core::TracingCompute traced_cpu(cpu, target);
        nn::Trainer trainer(t, &mc, traced_cpu, alloc, ds);
        while (trainer.next_step() < t.steps) {
          world.barrier();  // every rank starts the step together
          const nn::StepStats s = trainer.step();
          step_s[s.step][rank] = s.step_time_s;  // own slots: no lock needed
          compute_s[s.step][rank] = s.step_time_s - s.data_time_s;
          if (r.pipe && s.step > 0) {  // own slots; step 0 is the warm-up
            r.pipe->wait_s[std::size_t(s.step) - 1][std::size_t(rank)] = s.pipeline_wait_s;
            r.pipe->step_s[std::size_t(s.step) - 1][std::size_t(rank)] = s.step_time_s;
          }
          r.peak_mib[rank] = std::max(r.peak_mib[rank], s.memory.peak_total / kMiB);
          r.act_mib[rank] =
              std::max(r.act_mib[rank], s.memory.peak_of(core::MemCategory::Activation) / kMiB);
          std::lock_guard<std::mutex> lock(mu);
          for (int c = 0; c < core::kNumMemCategories; ++c)
            r.category_mib[c] = std::max(r.category_mib[c], s.memory.peak[c] / kMiB);
        }
      };
  std::vector<int> traced_ranks;
  if (job) {
    rank_fn(*job);
    traced_ranks = {job->rank()};
  } else {
    comm::local::run(P, rank_fn, std::chrono::minutes(10));
    for (int q = 0; q < P; ++q) traced_ranks.push_back(q);
  }
  r.comm = comm_figures(recorder.events(), traced_ranks, t.steps);
  if (job) {
    // One rank per process: the slowest rank's step times, every rank's peaks and the mean of
    // the communication figures, from every process.
    std::vector<double> mx;
    for (const auto& step : step_s) mx.push_back(step[job->rank()]);
    for (const auto& step : compute_s) mx.push_back(step[job->rank()]);
    mx.insert(mx.end(), r.peak_mib.begin(), r.peak_mib.end());
    mx.insert(mx.end(), r.act_mib.begin(), r.act_mib.end());
    mx.insert(mx.end(), r.category_mib.begin(), r.category_mib.end());
    job->all_reduce({mx.data(), mx.size(), core::DType::F64}, comm::ReduceOp::Max)->wait();
    std::size_t k = 0;
    for (auto& step : step_s) step.assign(P, mx[k++]);
    for (auto& step : compute_s) step.assign(P, mx[k++]);
    for (double& v : r.peak_mib) v = mx[k++];
    for (double& v : r.act_mib) v = mx[k++];
    for (double& v : r.category_mib) v = mx[k++];
    CommFigures& f = r.comm;
    std::vector<double> sum = {f.halo_exchanges, f.halo_mib, f.collectives, f.collective_mib, f.wait_ms,
                               f.collective_ms, f.coll_under_compute_ms, f.halo_under_compute_ms};
    job->all_reduce({sum.data(), sum.size(), core::DType::F64}, comm::ReduceOp::Avg)->wait();
    f = {sum[0], sum[1], sum[2], sum[3], sum[4], sum[5], sum[6], sum[7]};
    if (r.pipe) gather_pipeline(*r.pipe, *job);
  }
  if (r.pipe)
    for (int q = 0; q < P; ++q) {
      double& a = r.pipe->act_mib[std::size_t(r.pipe->stage_of_rank[std::size_t(q)])];
      a = std::max(a, r.act_mib[std::size_t(q)]);
    }
  std::vector<double> ms, cms;
  for (std::size_t i = 1; i < step_s.size(); ++i) {  // step 0 is the warm-up
    ms.push_back(1e3 * *std::max_element(step_s[i].begin(), step_s[i].end()));
    cms.push_back(1e3 * *std::max_element(compute_s[i].begin(), compute_s[i].end()));
  }
  r.ms = stats_of(ms);
  r.compute_ms = stats_of(cms);
  r.step_ms = std::move(ms);
  r.compute_step_ms = std::move(cms);
  return r;
}

/// Per stage: one micro-batch's activation peak for pipeline run `r` of options `o` (one M, one
/// schedule): r's own with M = 1, else that of one timed step of batch / M samples with M = 1 on
/// the same mesh (measured once per configuration and M; both schedules share it).
std::vector<double> micro_activation_mib(const TrainBenchOptions& o, const Run& r,
                                         comm::Backend* job) {
  if (r.micro_batches == 1) return r.pipe->act_mib;
  static std::map<std::string, std::vector<double>> measured;  // by configuration and M
  const std::string key = r.mesh + " " + ckpt_label(r) + r.precision + (r.overlap ? "+" : "-") +
                          std::to_string(r.micro_batches);
  if (auto it = measured.find(key); it != measured.end()) return it->second;
  TrainBenchOptions ref = one_run(o, 1, o.schedules.front());
  ref.batch = o.batch / r.micro_batches;
  ref.steps = 1;
  const Run q = measure(ref, r.ranks, r.checkpointing, r.precision, r.overlap, r.halos, job);
  return measured[key] = q.pipe->act_mib;
}

/// Adds a later round of the same configuration to `r`: its steps join r's (the memory and
/// communication figures stay those of the first round).
void add_round(Run& r, const Run& later) {
  r.step_ms.insert(r.step_ms.end(), later.step_ms.begin(), later.step_ms.end());
  r.compute_step_ms.insert(r.compute_step_ms.end(), later.compute_step_ms.begin(), later.compute_step_ms.end());
  r.ms = stats_of(r.step_ms);
  r.compute_ms = stats_of(r.compute_step_ms);
}

/// This machine's calibration for runs on P ranks of T threads each, measured now: in-process
/// ranks, or the ranks of the job `job` is one of (every process takes part), its kernels timed
/// in each of the run's `precisions` (a bf16 run is simulated with the bf16 rates).
sim::Calibration calibrate_now(int P, int threads, comm::Backend* job,
                               const std::vector<std::string>& precisions) {
  sim::CalibrateOptions co;
  co.ranks = P;
  co.threads = threads;
  co.precisions.clear();
  for (const std::string& p : precisions) co.precisions.push_back(*nn::parse_precision(p));
  const sim::ComputeFactory make_compute = [](int n) -> std::unique_ptr<compute::Backend> {
    return std::make_unique<compute::cpu::CpuBackend>(n);
  };
  const sim::WorldRunner run_world =
      job ? sim::job_world_runner(*job)
          : sim::WorldRunner([](int size, const std::function<void(comm::Backend&)>& fn) { comm::local::run(size, fn); });
  return sim::calibrate(make_compute, run_world, co);
}

/// Simulates run `r` (trained with `t`) on cpu-host:P with calibration `cal`, the engine told the
/// backend's progress (Capabilities::overlaps_compute: overlaps, else in-calls). The replay runs
/// the same TrainOptions and mesh the measured run trained with. A pipeline run is simulated on
/// the exact engine with every rank's trace (its receives give the simulated bubble).
sim::SimResult simulate_run(const Run& r, const nn::TrainOptions& t, const sim::Calibration& cal) {
  run::SimSetup s{t, core::DeviceMesh::parse(r.mesh), {}, {}, {}, {}};
  sim::apply_calibration(cal, s.catalog, s.engine);
  s.topology = run::load_topology("cpu-host:" + std::to_string(r.ranks), s.catalog);
  s.engine.comm_progress = r.overlaps_compute ? sim::CommProgress::Overlaps : sim::CommProgress::InCalls;
  const bool pipe = r.pipe.has_value();
  if (pipe) s.engine.engine = sim::EngineKind::Exact;
  return run::simulate(std::move(s), /*every_rank=*/pipe, /*keep_trace=*/pipe).result;
}

/// "[1.5, -2.25]": a JSON array of numbers.
std::string number_array(const std::vector<double>& v) {
  std::string s = "[";
  char buf[32];
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.6g", i ? ", " : "", v[i]);
    s += buf;
  }
  return s + "]";
}

/// "  [-3.1% .. +4.0%]": the paired errors' range, with more than one round.
std::string error_range(const std::vector<double>& errors) {
  if (errors.size() < 2) return "";
  const Stats s = stats_of(errors);
  char buf[64];
  std::snprintf(buf, sizeof buf, "  [%+.1f%% .. %+.1f%%]", 100 * s.min, 100 * s.max);
  return buf;
}

/// Simulates one round of run `r` with calibration `cal`: `measured` is the round's run (its
/// median step less loading is what the prediction is paired with); r.sim is over the rounds.
void simulate_round(Run& r, const Run& measured, const nn::TrainOptions& t, const sim::Calibration& cal) {
  const sim::SimResult res = simulate_run(r, t, cal);
  const double ms = double(res.iteration_ps) * 1e-9;
  if (r.pipe) add_simulation(*r.pipe, res);
  r.sim_ms.push_back(ms);
  r.sim_errors.push_back(ms / measured.compute_ms.median - 1);
  if (cal.concurrent_ranks != r.ranks || cal.threads_per_rank != r.threads)
    r.sim_note = "calibrated on " + std::to_string(cal.concurrent_ranks) + " rank(s) x " +
                 std::to_string(cal.threads_per_rank) + " thread(s)";
  r.sim = stats_of(r.sim_ms);
}

/// One timed form of the libtorch step (TorchForm), as the table and the JSON give it.
struct TorchRow {
  std::string name;  // "libtorch fp32 NCHW", "libtorch bf16 autocast channels-last", ...
  bool channels_last = false, bf16 = false;
  Stats ms;
};

/// The rows issue 37's ratios divide (train_targets.hpp): tessera's first P=1 run of each
/// precision without checkpointing on mesh sp=1 with one micro-batch, and every libtorch form;
/// `refused`: why no ratio against libtorch may be given ("" when it may).
TargetRows target_rows(const std::vector<Run>& runs, const std::vector<TorchRow>& torch,
                       const std::string& refused) {
  TargetRows t;
  for (const Run& r : runs) {
    if (r.ranks != 1 || r.checkpointing != "none" || r.mesh != "sp=1" || r.micro_batches != 1)
      continue;
    const TimedRow row{"tessera " + r.precision + " (P=1, checkpointing none)", r.ms.median};
    if (r.precision == "fp32" && !t.tessera_fp32) t.tessera_fp32 = row;
    if (r.precision == "bf16" && !t.tessera_bf16) t.tessera_bf16 = row;
  }
  for (const TorchRow& r : torch)
    (r.bf16 ? t.torch_bf16 : t.torch_fp32).push_back({r.name, r.ms.median});
  t.torch_refused = refused;
  t.amx = compute::cpu::onednn_info().isa.find("amx") != std::string::npos;
  return t;
}

#ifdef TESSERA_BENCH_HAVE_TORCH
// ConvNeXt in libtorch, as in the reference implementation (Liu et al. 2022): LayerNorm over
// channels of NCHW tensors by permuting to NHWC, blocks dw7x7 -> LN -> Linear 4x -> GELU ->
// Linear -> layer scale -> residual. No DropPath (tessera runs the preset's, 0.1 for ConvNeXt-T,
// as a per-sample scale: a little extra work on its side). With `linear` false the Linear pair
// is a pair of 1x1 convs on NCHW (see the top of the file).
// LayerNorm in the dtype of its weights: under bf16 autocast, libtorch 1.13 leaves layer_norm out
// of its cast lists and its CPU kernel refuses a bf16 input with f32 weights ("expected scalar
// type BFloat16 but found Float"; PyTorch 2.x takes the mix), so the input goes to f32 first, as
// autocast's own fp32 policy casts. A no-op in fp32.
torch::Tensor layer_norm(torch::nn::LayerNorm& ln, const torch::Tensor& x) {
  return ln(x.to(ln->weight.scalar_type()));
}
torch::Tensor ln_channels(torch::nn::LayerNorm& ln, const torch::Tensor& x) {
  return layer_norm(ln, x.permute({0, 2, 3, 1})).permute({0, 3, 1, 2});
}
torch::nn::LayerNorm make_ln(std::int64_t c) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c}).eps(1e-6));
}

/// ATen's convolution backend per kind of conv layer, noted while `on` (during one training
/// step, so with grad mode, requires_grad weights and the step's thread count).
struct ConvPaths {
  bool on = false;
  std::vector<std::pair<std::string, std::vector<std::string>>> by_kind;  // in first-seen order
  void note(const std::string& kind, const std::string& path) {
    for (auto& [k, v] : by_kind)
      if (k == kind) return v.push_back(path);
    by_kind.push_back({kind, {path}});
  }
};

// m(x), first noting in `paths` (when on) the backend at::conv2d picks for this call.
torch::Tensor conv(torch::nn::Conv2d& m, const torch::Tensor& x, const char* kind,
                   ConvPaths* paths) {
  if (paths && paths->on) {
    const auto& op = m->options;
    const auto pad = c10::get<torch::ExpandingArray<2>>(op.padding());
    paths->note(kind, conv2d_path(x, m->weight, m->bias, op.stride()->at(0), pad->at(0),
                                  op.dilation()->at(0), op.groups()));
  }
  return m(x);
}

struct BlockImpl : torch::nn::Module {
  torch::nn::Conv2d dw{nullptr}, pw1{nullptr}, pw2{nullptr};
  torch::nn::LayerNorm ln{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::Tensor gamma;
  ConvPaths* paths;
  BlockImpl(std::int64_t d, bool linear, ConvPaths* paths) : paths(paths) {
    dw = register_module("dw",
                         torch::nn::Conv2d(torch::nn::Conv2dOptions(d, d, 7).padding(3).groups(d)));
    ln = register_module("ln", make_ln(d));
    if (linear) {
      fc1 = register_module("fc1", torch::nn::Linear(d, 4 * d));
      fc2 = register_module("fc2", torch::nn::Linear(4 * d, d));
      gamma = register_parameter("gamma", torch::full({d}, 1e-6));
    } else {
      pw1 = register_module("pw1", torch::nn::Conv2d(torch::nn::Conv2dOptions(d, 4 * d, 1)));
      pw2 = register_module("pw2", torch::nn::Conv2d(torch::nn::Conv2dOptions(4 * d, d, 1)));
      gamma = register_parameter("gamma", torch::full({1, d, 1, 1}, 1e-6));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor h = conv(dw, x, "depthwise 7x7", paths);
    if (fc1) {
      torch::Tensor y = fc2(torch::gelu(fc1(layer_norm(ln, h.permute({0, 2, 3, 1})))));
      return x + (gamma * y).permute({0, 3, 1, 2});
    }
    const torch::Tensor u = torch::gelu(conv(pw1, ln_channels(ln, h), "pointwise 1x1", paths));
    return x + gamma * conv(pw2, u, "pointwise 1x1", paths);
  }
};
TORCH_MODULE(Block);

struct ConvNeXtImpl : torch::nn::Module {
  std::vector<torch::nn::Conv2d> down;  // down[0] is the 4x4/s4 stem
  std::vector<torch::nn::LayerNorm> down_ln;
  std::vector<std::vector<Block>> blocks;
  torch::nn::LayerNorm head_ln{nullptr};
  torch::nn::Linear head{nullptr};
  ConvPaths* paths;

  ConvNeXtImpl(const nn::ModelSpec& s, bool linear, ConvPaths* paths) : paths(paths) {
    std::int64_t c = s.in_channels;
    for (std::size_t i = 0; i < s.depths.size(); ++i) {
      const std::int64_t d = s.widths[i];
      const int k = i == 0 ? 4 : 2;
      const std::string n = std::to_string(i);
      if (i > 0) down_ln.push_back(register_module("down_ln" + n, make_ln(c)));
      down.push_back(register_module(
          "down" + n, torch::nn::Conv2d(torch::nn::Conv2dOptions(c, d, k).stride(k))));
      if (i == 0) down_ln.push_back(register_module("stem_ln", make_ln(d)));
      blocks.emplace_back();
      for (int b = 0; b < s.depths[i]; ++b)
        blocks.back().push_back(
            register_module("s" + n + "b" + std::to_string(b), Block(d, linear, paths)));
      c = d;
    }
    head_ln = register_module("head_ln", make_ln(c));
    head = register_module("head", torch::nn::Linear(c, s.num_classes));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (i == 0)
        x = ln_channels(down_ln[0], conv(down[0], x, "stem 4x4/4", paths));
      else
        x = conv(down[i], ln_channels(down_ln[i], x), "downsample 2x2/2", paths);
      for (Block& b : blocks[i]) x = b(x);
    }
    return head(layer_norm(head_ln, x.mean({2, 3})));
  }
};
TORCH_MODULE(ConvNeXt);

/// One form of the libtorch step: the memory format of the input and the 4-d parameters, and the
/// precision (bf16: the forward and the loss under CPU autocast, fp32 master weights).
struct TorchForm {
  bool channels_last = false;
  bool bf16 = false;
  std::string name() const {
    return std::string("libtorch ") + (bf16 ? "bf16 autocast" : "fp32") +
           (channels_last ? " channels-last" : " NCHW");
  }
};

/// The forms bench_train times: fp32 NCHW (the ratio tessera / libtorch) and channels-last, and
/// with --precision bf16 both again under bf16 autocast (libtorch 1.13's CPU autocast has no fp16).
std::vector<TorchForm> torch_forms(const TrainBenchOptions& o) {
  std::vector<TorchForm> v = {{false, false}, {true, false}};
  if (std::find(o.precisions.begin(), o.precisions.end(), "bf16") != o.precisions.end())
    v.insert(v.end(), {{false, true}, {true, true}});
  return v;
}

/// What `with torch.autocast("cpu", dtype=torch.bfloat16):` does around its body in PyTorch
/// 1.13 (torch/amp/autocast_mode.py), through the same C++ calls: enable, set the dtype,
/// increment the nesting; on exit decrement it, drop the cache of cast weights at nesting 0,
/// restore the previous state.
class CpuAutocast {
 public:
  explicit CpuAutocast(bool on) : on_(on) {
    if (!on_) return;
    prev_ = at::autocast::is_cpu_enabled();
    prev_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~CpuAutocast() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_cpu_enabled(prev_);
    at::autocast::set_autocast_cpu_dtype(prev_dtype_);
  }
  CpuAutocast(const CpuAutocast&) = delete;
  CpuAutocast& operator=(const CpuAutocast&) = delete;

 private:
  bool on_, prev_ = false;
  at::ScalarType prev_dtype_ = at::kBFloat16;
};

/// The libtorch step's times and what it ran on.
struct TorchRun {
  TorchForm form;
  Stats ms;
  TorchPeer peer;
  std::string problem;  // why no ratio may be given; empty when the peer is set up as users run it
  ConvPaths paths;
};

TorchRun measure_torch(const TrainBenchOptions& o, const TorchForm& form) {
  TorchRun r;
  r.form = form;
  // 2 threads in all: ATen's OpenMP pool and the BLAS's own pool (at::set_num_threads does not
  // reach OpenBLAS or BLIS).
  constexpr int kThreads = 2;
  at::set_num_threads(kThreads);
  set_blas_threads(kThreads);
  r.peer = torch_peer();  // after the thread counts are set: the BLAS reports its own
  r.problem = blas_peer_problem(r.peer.blas, kThreads);
  torch::manual_seed(0);
  nn::ModelSpec spec = nn::model_preset(o.model);
  spec.num_classes = o.classes;
  spec.in_channels = int(o.input[0]);
  ConvNeXt net(spec, o.torch_linear, &r.paths);
  const auto format =
      form.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  if (form.channels_last) {  // as Python's module.to(memory_format=...): each 4-d parameter's data
    torch::NoGradGuard no_grad;
    for (torch::Tensor& p : net->parameters())
      if (p.dim() == 4) p.set_data(p.contiguous(format));
  }
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.05));
  const torch::Tensor x =
      torch::randn({o.batch, o.input[0], o.input[1], o.input[2]}).contiguous(format);
  const torch::Tensor y = torch::randint(0, o.classes, {o.batch}, torch::kLong);
  // Two warm-up steps: libtorch's second step is still several times slower than the later ones.
  constexpr int kWarmup = 2;
  std::vector<double> ms;
  for (int s = 0; s < kWarmup + o.steps; ++s) {
    // ATen's choices are made per call: note them in one step (in fp32: under autocast the
    // convolutions see bf16 copies, not the tensors conv2d_path would be asked about).
    r.paths.on = s == 0 && !form.bf16;
    const auto t0 = std::chrono::steady_clock::now();
    opt.zero_grad();
    torch::Tensor loss;
    {
      const CpuAutocast autocast(form.bf16);  // the forward and the loss, as users write it
      loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    }
    loss.backward();
    opt.step();
    const double dt =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s >= kWarmup) ms.push_back(dt);
  }
  r.paths.on = false;
  r.ms = stats_of(ms);
  return r;
}
#endif

[[noreturn]] void usage(int rc) {
  std::fprintf(
      stderr,
      "usage: bench_train [--json] [--steps N] [--model NAME] [--input CxHxW] [--batch N]\n"
      "                   [--ranks 1,2,4] [--checkpointing none,block] [--no-torch]\n"
      "                   [--torch-linear] [--precision bf16|fp16] [--overlap on|off|both]\n"
      "                   [--halo-recompute keep|exchange|both] [--backend local|ucx]\n"
      "                   [--device cpu|cuda|cuda:N] [--tf32] [--warmup N]\n"
      "                   [--pointwise linear|conv] [--peer-script FILE] [--python EXE]\n"
      "                   [--simulate [--calibrations K] | --calibration FILE]\n"
      "                   [--mesh SPEC] [--micro-batches 1,2,4] [--schedule 1f1b|gpipe|both]\n"
      "  training steps of --model (default convnext-t) at --input (3x256x1024), --batch\n"
      "      (2), AdamW, sharded along W over --ranks (1,2,4) local ranks, --checkpointing\n"
      "      none and block; step time, images/s, peak memory per rank and category; beside\n"
      "      libtorch's same model on 2 threads, NCHW and channels-last (--no-torch: without it)\n"
      "  every run is traced: per rank and step, halo exchanges, collectives, the time\n"
      "      waited, and how much of the transfers lay under compute (\"hidden\"; 0 with\n"
      "      TESSERA_LOCAL_PROGRESS=calls or TESSERA_UCX_PROGRESS=calls)\n"
      "  --json: one JSON object on stdout instead of the table\n"
      "  --steps: timed steps per configuration after one warm-up step (default 2)\n"
      "  --torch-linear: libtorch's pointwise layers as nn::Linear instead of 1x1 convs\n"
      "  --precision bf16|fp16: every configuration also in that mixed precision, beside fp32;\n"
      "      bf16 also times libtorch under bf16 CPU autocast (NCHW and channels-last) and\n"
      "      prints issue 37's ratios (bf16_over_fp32, bf16_speedup_vs_torch_autocast,\n"
      "      fp32_speedup_vs_torch_best) with the rows each divides\n"
      "  --overlap: halo exchange and bucket all-reduce overlapped with compute (on, the\n"
      "      default), not (off), or every configuration with P > 1 both ways (both)\n"
      "  --halo-recompute: with checkpointing, a block's recompute reuses the halos its\n"
      "      forward received (keep, the default), exchanges them again (exchange), or both\n"
      "  --simulate: K rounds (default 3) per rank count of: calibrate this machine (as\n"
      "      tessera calibrate --ranks P --threads T, in each --precision), then run every\n"
      "      configuration; print each run's calibrated simulation (median over the K)\n"
      "      beside its measured step,\n"
      "      and the error of each calibration against the steps measured just after it;\n"
      "      --calibration FILE: simulate with that file instead (one round); each run is\n"
      "      simulated on cpu-host:P with the same TrainOptions and the backend's progress\n"
      "      (overlaps, else in-calls); --json: simulated_step_ms with its min/max over the\n"
      "      rounds, simulated_errors per round and their median simulated_error\n"
      "  --mesh: every run on this mesh (\"pp=2\", \"pp=2,sp=2\") instead of sp=P for each of\n"
      "      --ranks; --micro-batches: every configuration with each micro-batch count M\n"
      "      (gradient accumulation; M divides --batch); with a mesh dim pp, --schedule (1f1b,\n"
      "      the default) orders each stage's micro-batches, and a pipeline table gives per\n"
      "      stage the bubble (time waited for another stage over the step time, measured and,\n"
      "      with --simulate/--calibration, simulated) beside the ideal (pp-1)/(M+pp-1), and\n"
      "      the activation peak beside in-flight micro-batches x one micro-batch's peak (an\n"
      "      extra M=1 run of batch/M); --json: each run's \"pipeline\" object\n"
      "  --backend ucx: run under `tessera launch --nproc P -- bench_train --backend ucx`;\n"
      "      each process is one rank, --ranks is the job's size, rank 0 prints (no libtorch)\n"
      "  --device cuda: one unsharded rank on the cuda compute backend (default input\n"
      "      3x512x2048, 5 steps after --warmup 2), beside PyTorch eager on the same GPU run\n"
      "      by --peer-script (default bench/torch_gpu_peer.py) with --python (python3);\n"
      "      --tf32 lets fp32 convolutions and matmuls use TF32 on both sides (default off);\n"
      "      --precision bf16|fp16: both sides in that mixed precision only (tessera's, and\n"
      "      PyTorch AMP: torch.autocast with fp32 master weights), no fp32 run beside it;\n"
      "      --pointwise: the peer's pointwise layers as nn.Linear (default) or 1x1 convs;\n"
      "      --no-torch: tessera only; --ranks and --checkpointing do not apply\n"
      "exit status 3: figures printed, but no ratio, because libtorch runs on the\n"
      "reference BLAS or a single-threaded one (bench/README.md); 4 (--device cuda):\n"
      "tessera's figures printed, the PyTorch peer not available; 1: an error (no GPU)\n");
  std::exit(rc);
}

int run(int argc, char** argv) {
  TrainBenchOptions o;
  try {
    o = parse_train_options(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    usage(2);
  }
  if (o.help) usage(0);
  if (o.device != "cpu") {
    const GpuTrainOptions g = gpu_train_options(o);
    cuda_device_index(g.device);  // a clear error for a --device that is neither cpu nor cuda[:N]
    return run_train_gpu(g);
  }
  const std::string input = std::to_string(o.input[0]) + "x" + std::to_string(o.input[1]) + "x" +
                            std::to_string(o.input[2]);
  [[maybe_unused]] const bool torch_wanted =
      o.torch && o.backend == "local" && nn::model_preset(o.model).family == "convnext";
#ifdef TESSERA_BENCH_HAVE_TORCH
  // Said before the minutes of tessera runs, so that a misconfigured peer can be fixed first.
  if (const std::string p = torch_wanted ? blas_peer_problem(probe_blas(), 2) : ""; !p.empty())
    std::fprintf(stderr, "bench_train: the libtorch step will be timed but no ratio given: %s\n",
                 p.c_str());
#endif
  std::vector<Run> runs;
  WorldBackend job;  // one rank of a multi-process job (--backend), else P local ranks per run
  std::vector<int> rank_counts = o.ranks;
  if (o.backend != "local") {
    job = make_world_backend(o.backend, std::chrono::minutes(10));
    rank_counts = {job.world->size()};
  }
  if (!o.mesh.empty()) {
    const int size = core::DeviceMesh::parse(o.mesh).size();
    if (job.world && job.world->size() != size)
      throw tessera::InvalidArgument("bench_train: --mesh " + o.mesh + " has " +
                                     std::to_string(size) + " ranks but the job has " +
                                     std::to_string(job.world->size()) +
                                     "; launch it with --nproc " + std::to_string(size));
    rank_counts = {size};  // --ranks does not apply
  }
  const bool printer = !job.world || job.world->rank() == 0;
  if (o.simulate && !o.calibration.empty()) throw tessera::InvalidArgument("bench_train: --simulate and --calibration FILE both "
                                                                  "say which calibration to simulate with; give one");
  std::vector<sim::Calibration> file_cal;
  if (!o.calibration.empty()) file_cal.push_back(sim::load_calibration(o.calibration));
  // With --simulate, K rounds per rank count: a calibration, then every configuration's steps,
  // each predicted with that calibration. The machine's speed drifts over minutes (other tenants
  // of the host), so each prediction is paired with the steps measured just after it.
  const int rounds = o.simulate ? o.calibrations : 1;
  for (const std::string& ck : o.checkpointing)
    for (int P : rank_counts) {
      const std::size_t first = runs.size();
      for (int round = 0; round < rounds; ++round) {
        const sim::Calibration* cal = file_cal.empty() ? nullptr : &file_cal[0];
        sim::Calibration now;
        if (o.simulate) {
          if (printer)
            std::fprintf(stderr, "round %d/%d: calibrating %d %s rank(s) x %d thread(s)...\n", round + 1, rounds, P,
                         o.backend.c_str(), threads_for(P));
          now = calibrate_now(P, threads_for(P), job.world.get(), o.precisions);
          cal = &now;
        }
        std::size_t config = 0;
        for (const std::string& pr : o.precisions)
          for (const bool ov : o.overlaps)
            for (const std::string& halos :
                 ck == "none" ? std::vector<std::string>{"-"} : o.halo_recomputes)
              for (const int M : o.micro_batches)
                for (const std::string& sched : o.schedules) {
                  if (!ov && P == 1 && o.overlaps.size() > 1)
                    continue;  // one rank exchanges nothing
                  // One micro-batch runs F0 B0 in either schedule: the first schedule's run says
                  // it.
                  if (M == 1 && sched != o.schedules.front()) continue;
                  const TrainBenchOptions one = one_run(o, M, sched);
                  const std::string where = o.mesh.empty()
                                                ? std::to_string(P) + " " + o.backend + " rank(s)"
                                                : o.mesh + " (" + o.backend + ")";
                  const std::string pipe = o.mesh.empty() ? "" : ", " + sched;
                  const std::string micro =
                      M > 1 || !o.mesh.empty() ? ", M=" + std::to_string(M) + pipe : "";
                  if (printer)
                    std::fprintf(
                        stderr,
                        "training %s %s batch %d on %s, checkpointing %s%s, %s, overlap %s%s...\n",
                        o.model.c_str(), input.c_str(), o.batch, where.c_str(), ck.c_str(),
                        halos == "-" ? "" : (" (halos " + halos + ")").c_str(), pr.c_str(),
                        ov ? "on" : "off", micro.c_str());
                  Run measured = measure(one, P, ck, pr, ov, halos, job.world.get());
                  if (round == 0) {
                    if (measured.pipe)
                      measured.pipe->micro_act_mib =
                          micro_activation_mib(one, measured, job.world.get());
                    runs.push_back(measured);
                  } else {
                    add_round(runs[first + config], measured);
                  }
                  if (cal && printer)
                    simulate_round(runs[first + config], measured,
                                   train_options(one, ck, pr, ov, halos), *cal);
                  ++config;
                }
      }
    }
  if (!printer) return 0;
  // The fp32 run of the same configuration (for the mixed-precision ratios).
  auto fp32_of = [&](const Run& r) -> const Run* {
    for (const Run& q : runs)
      if (q.ranks == r.ranks && q.checkpointing == r.checkpointing && q.halos == r.halos &&
          q.precision == "fp32" && q.overlap == r.overlap && same_pipeline(q, r))
        return &q;
    return nullptr;
  };
  // The same configuration with overlap on (for the overlap-off ratios).
  auto overlapped_of = [&](const Run& r) -> const Run* {
    for (const Run& q : runs)
      if (q.ranks == r.ranks && q.checkpointing == r.checkpointing && q.halos == r.halos &&
          q.precision == r.precision && q.overlap && same_pipeline(q, r))
        return &q;
    return nullptr;
  };
  bool have_torch = false;
  Stats torch_ms;
  std::string peer_line, peer_json = "null", paths_line, paths_json = "[]", problem;
  std::vector<TorchRow> torch_rows;  // every form timed, fp32 NCHW first
#ifdef TESSERA_BENCH_HAVE_TORCH
  if (torch_wanted) {
    std::vector<TorchRun> forms;
    for (const TorchForm& f : torch_forms(o)) {
      std::fprintf(stderr, "%s %s step...\n", f.name().c_str(), o.model.c_str());
      forms.push_back(measure_torch(o, f));
      torch_rows.push_back({f.name(), f.channels_last, f.bf16, forms.back().ms});
    }
    const TorchRun& tr = forms.front();  // fp32 NCHW: the ratio tessera / libtorch, the paths
    torch_ms = tr.ms;
    have_torch = true;
    problem = tr.problem;
    peer_line = describe(tr.peer);
    peer_json = torch_peer_json(tr.peer, problem);
    std::vector<std::string> pj;
    for (const auto& [kind, v] : tr.paths.by_kind) {
      paths_line += (paths_line.empty() ? "" : ", ") + kind + ": " + join_paths(v);
      pj.push_back(Json().str("layer", kind).str("path", join_paths(v)).str());
    }
    if (o.torch_linear) paths_line += ", pointwise Linear: at::matmul -> at::mm (BLAS sgemm_)";
    paths_json = json_array(pj);
  }
#endif
  const bool give_ratio = have_torch && problem.empty();
  auto ratio = [&](const Run& r) { return r.ms.median / torch_ms.median; };
  const std::vector<TargetRatio> targets =
      issue37_ratios(target_rows(runs, torch_rows, have_torch ? problem : ""));
  auto max_of = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };

  if (o.json) {
    std::vector<std::string> rs;
    for (const Run& r : runs) {
      std::vector<std::string> per_rank;
      for (std::size_t q = 0; q < r.peak_mib.size(); ++q)
        per_rank.push_back(Json()
                               .num("rank", double(q))
                               .num("peak_total_mib", r.peak_mib[q])
                               .num("peak_activation_mib", r.act_mib[q])
                               .str());
      Json cat;
      for (int c = 0; c < core::kNumMemCategories; ++c)
        cat.num(std::string(core::mem_category_name(static_cast<core::MemCategory>(c))), r.category_mib[c]);
      Json j;
      j.num("ranks", r.ranks)
          .str("mesh", r.mesh)
          .num("micro_batches", r.micro_batches)
          .num("threads_per_rank", r.threads)
          .str("backend", o.backend)
          .str("checkpointing", r.checkpointing)
          .str("halo_recompute", r.halos)
          .str("precision", r.precision)
          .raw("overlap", r.overlap ? "true" : "false")
          .raw("peak_mib_by_category", cat.str())
          .stats("step_ms_", r.ms)
          .num("images_per_s", o.batch / (r.ms.median * 1e-3))
          .num("peak_total_mib_max", max_of(r.peak_mib))
          .num("peak_activation_mib_max", max_of(r.act_mib))
          .raw("memory", json_array(per_rank))
          .raw("comm_per_step",
               Json()
                   .num("halo_exchanges", r.comm.halo_exchanges)
                   .num("halo_mib_sent", r.comm.halo_mib)
                   .num("collectives", r.comm.collectives)
                   .num("collective_mib", r.comm.collective_mib)
                   .num("wait_ms", r.comm.wait_ms)
                   .num("collective_ms", r.comm.collective_ms)
                   .num("collective_under_compute_ms", r.comm.coll_under_compute_ms)
                   .num("halo_under_compute_ms", r.comm.halo_under_compute_ms)
                   .str());
      if (give_ratio && r.ranks == 1 && r.precision == "fp32") j.num("tessera_over_torch", ratio(r));
      if (const Run* f = fp32_of(r); f && r.precision != "fp32")
        j.num("step_time_over_fp32", r.ms.median / f->ms.median)
            .num("activation_over_fp32", max_of(r.act_mib) / max_of(f->act_mib));
      if (const Run* on = overlapped_of(r); on && !r.overlap) j.num("step_time_over_overlap_on", r.ms.median / on->ms.median);
      j.stats("step_less_loading_ms_", r.compute_ms).raw("backend_overlaps_compute", r.overlaps_compute ? "true" : "false");
      const Stats errors = stats_of(r.sim_errors);
      if (r.sim.reps > 0)
        j.num("simulated_step_ms", r.sim.median)
            .num("simulated_step_ms_min", r.sim.min)
            .num("simulated_step_ms_max", r.sim.max)
            .num("calibrations", r.sim.reps)
            .num("simulated_error", errors.median)
            .num("simulated_error_min", errors.min)
            .num("simulated_error_max", errors.max)
            .raw("simulated_errors", number_array(r.sim_errors))
            .str("simulated_note", r.sim_note);
      if (r.pipe) j.raw("pipeline", pipeline_json(*r.pipe));
      rs.push_back(j.str());
    }
    Json top;
    top.str("tessera_version", std::string(core::version()))
        .str("build", core::build_description())
        .raw("onednn", onednn_json());
    top.str("model", o.model).str("input", input).num("batch", o.batch).raw("runs", json_array(rs));
    for (const TargetRatio& t : targets) top.raw(t.key, target_json(t));
    std::vector<std::string> forms;
    for (const TorchRow& f : torch_rows)
      forms.push_back(Json()
                          .str("form", f.name)
                          .str("memory_format", f.channels_last ? "channels_last" : "nchw")
                          .str("precision", f.bf16 ? "bf16_autocast" : "fp32")
                          .stats("step_ms_", f.ms)
                          .num("images_per_s", o.batch / (f.ms.median * 1e-3))
                          .str());
    top.raw("torch", have_torch ? Json()
                                      .num("threads", 2)
                                      .str("pointwise", o.torch_linear ? "linear" : "conv1x1")
                                      .stats("step_ms_", torch_ms)
                                      .num("images_per_s", o.batch / (torch_ms.median * 1e-3))
                                      .raw("conv_paths", paths_json)
                                      .raw("forms", json_array(forms))
                                      .raw("peer", peer_json)
                                      .str()
                                : "null");
    std::printf("%s\n", top.str().c_str());
    return have_torch && !give_ratio ? kExitPeerMisconfigured : 0;
  }
  std::printf("%s\n%s\n", core::version_line().c_str(), cpu_kernels_line().c_str());
  std::printf(
      "%s, input %s, batch %d, %d classes, AdamW, synthetic data, sharded along W, %s ranks\n"
      "step time: slowest rank, %d timed steps after 1 warm-up; peak memory: per rank "
      "(max over ranks)\n"
      "note: this machine has 2 cores, so P > 1 shows the overhead of sharding, not a "
      "speed-up; ckpt: checkpointing, and with it /keep or /exchange (halo recompute)\n\n%-14s %5s %4s %5s %4s %10s "
      "%19s %9s %11s %11s  peak MiB by category (max over ranks)\n",
      o.model.c_str(), input.c_str(), o.batch, o.classes, o.backend.c_str(), o.steps, "ckpt", "ranks", "thr", "prec", "ovl",
      "median ms", "[min-max] ms", "images/s", "peak MiB", "act MiB");
  for (const Run& r : runs) {
    std::printf("%-14s %5d %4d %5s %4s %10.0f   [%6.0f - %6.0f] %9.3f %11.1f %11.1f ",
                run_label(r).c_str(), r.ranks, r.threads, r.precision.c_str(),
                r.overlap ? "on" : "off", r.ms.median, r.ms.min, r.ms.max,
                o.batch / (r.ms.median * 1e-3), max_of(r.peak_mib), max_of(r.act_mib));
    for (int c = 0; c < core::kNumMemCategories; ++c)
      std::printf(" %s %.1f", std::string(core::mem_category_name(static_cast<core::MemCategory>(c))).c_str(),
                  r.category_mib[c]);
    std::printf("\n");
  }
  std::printf("\ncommunication per step, mean over ranks, from the trace (wait: inside Work::wait; coll ms: while\n"
              "collectives' data moved; hidden: that time, and halo events' time, under this rank's compute events)\n"
              "%-14s %5s %5s %4s %8s %9s %6s %9s %8s %8s %11s %11s\n",
              "ckpt", "ranks", "prec", "ovl", "halo ex", "halo MiB", "colls", "coll MiB", "wait ms", "coll ms",
              "coll hidden", "halo hidden");
  for (const Run& r : runs)
    if (r.ranks > 1)
      std::printf("%-14s %5d %5s %4s %8.1f %9.2f %6.1f %9.2f %8.2f %8.2f %11.2f %11.2f\n",
                  run_label(r).c_str(), r.ranks, r.precision.c_str(), r.overlap ? "on" : "off",
                  r.comm.halo_exchanges, r.comm.halo_mib, r.comm.collectives, r.comm.collective_mib,
                  r.comm.wait_ms, r.comm.collective_ms, r.comm.coll_under_compute_ms,
                  r.comm.halo_under_compute_ms);
  std::printf("\n");
  if (std::any_of(runs.begin(), runs.end(), [](const Run& r) { return r.sim.reps > 0; })) {
    std::printf("calibrated simulation (%s), told the backend's progress (overlaps: data moves while the ranks\n"
                "compute; in-calls: only inside the backend's calls), against the measured step less data loading\n"
                "(which the simulator does not model), slowest rank; simulated: median over the calibrations;\n"
                "error: median over the rounds of each calibration's prediction against the steps measured just\n"
                "after it [their range]\n"
                "%-14s %5s %4s %5s %4s %9s %12s %19s %13s %19s %8s\n",
                o.simulate ? "rounds of a calibration, then every run of the rank count" : o.calibration.c_str(), "ckpt", "ranks",
                "thr", "prec", "ovl", "progress", "measured ms", "[min-max] ms", "simulated ms", "[min-max] ms", "error");
    for (const Run& r : runs)
      if (r.sim.reps > 0)
        std::printf(
            "%-14s %5d %4d %5s %4s %9s %12.1f   [%6.1f - %6.1f] %13.1f   [%6.1f - %6.1f] "
            "%+7.1f%%%s%s%s\n",
            run_label(r).c_str(), r.ranks, r.threads, r.precision.c_str(), r.overlap ? "on" : "off",
            r.overlaps_compute ? "overlaps" : "in-calls", r.compute_ms.median, r.compute_ms.min,
            r.compute_ms.max, r.sim.median, r.sim.min, r.sim.max,
            100 * stats_of(r.sim_errors).median, error_range(r.sim_errors).c_str(),
            r.sim_note.empty() ? "" : "  ", r.sim_note.c_str());
    std::printf("\n");
  }
  std::vector<const PipelineFigures*> pipes;
  std::vector<std::string> pipe_labels;
  for (const Run& r : runs)
    if (r.pipe)
      pipes.push_back(&*r.pipe),
          pipe_labels.push_back(ckpt_label(r) + " " + r.mesh + " " + r.precision);
  print_pipeline_table(pipes, pipe_labels);
  for (const Run& r : runs)
    if (const Run* f = fp32_of(r); f && r.precision != "fp32")
      std::printf("%s / fp32 (P=%d, checkpointing %s): step time %.2fx, activation peak %.3fx, total peak %.3fx\n",
                  r.precision.c_str(), r.ranks, r.checkpointing.c_str(), r.ms.median / f->ms.median,
                  max_of(r.act_mib) / max_of(f->act_mib), max_of(r.peak_mib) / max_of(f->peak_mib));
  for (const Run& r : runs)
    if (const Run* on = overlapped_of(r); on && !r.overlap)
      std::printf("overlap off / on (P=%d, checkpointing %s, %s): step time %.2fx [%.2f - %.2f]\n",
                  r.ranks, run_label(r).c_str(), r.precision.c_str(), r.ms.median / on->ms.median,
                  r.ms.min / on->ms.max, r.ms.max / on->ms.min);
  for (const Run& r : runs)
    for (const Run& q : runs)
      if (r.halos == "keep" && q.halos == "exchange" && q.ranks == r.ranks && q.checkpointing == r.checkpointing &&
          q.precision == r.precision && q.overlap == r.overlap && r.ranks > 1)
        std::printf("halo recompute keep / exchange (P=%d, checkpointing %s, %s, overlap %s): %.1f / %.1f halo exchanges "
                    "and %.2f / %.2f MiB sent per step, halo-buffer peak %.1f / %.1f MiB, step time %.2fx\n",
                    r.ranks, r.checkpointing.c_str(), r.precision.c_str(), r.overlap ? "on" : "off",
                    r.comm.halo_exchanges, q.comm.halo_exchanges, r.comm.halo_mib, q.comm.halo_mib,
                    r.category_mib[int(core::MemCategory::HaloBuffer)], q.category_mib[int(core::MemCategory::HaloBuffer)],
                    r.ms.median / q.ms.median);
  if (have_torch) {
    std::printf(
        "\nlibtorch (torch::nn, 2 threads, pointwise layers as %s; bf16 autocast: the "
        "forward and loss under CPU autocast, fp32 master weights), %d timed steps after 2 "
        "warm-up\n%-40s %10s %19s %9s\n",
        o.torch_linear ? "Linear" : "1x1 convs", o.steps, "form", "median ms", "[min-max] ms",
        "images/s");
    for (const TorchRow& f : torch_rows)
      std::printf("%-40s %10.0f   [%6.0f - %6.0f] %9.3f\n", f.name.c_str(), f.ms.median, f.ms.min,
                  f.ms.max, o.batch / (f.ms.median * 1e-3));
    std::printf("%s\nlibtorch convolution paths (fp32 NCHW): %s\n", peer_line.c_str(),
                paths_line.c_str());
  }
  std::printf("\nissue 37 targets (rows of this run, medians):\n");
  for (const TargetRatio& t : targets) print_target(t);
  if (have_torch) {
    if (!give_ratio) {
      std::printf("no time ratio against libtorch: %s\n", problem.c_str());
      return kExitPeerMisconfigured;
    }
    for (const Run& r : runs)
      if (r.ranks == 1 && r.precision == "fp32")
        std::printf("time ratio tessera (P=1, checkpointing %s) / libtorch: %.2f\n",
                    r.checkpointing.c_str(), ratio(r));
  }
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  return tessera::bench::run_main("bench_train", tessera::bench::run, argc, argv);
}
