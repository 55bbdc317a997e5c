// measure_runtime: kernels timed where they really run — inside training steps of small
// reference models (ConvNeXt and RegNet, two sizes each), with the caches as the previous
// kernels leave them — and the runtime's own host work per kernel call (module code, tensor
// allocation, gradient-bucket zeroing: everything of a step that is neither a kernel nor data
// loading).
#include <algorithm>
#include <chrono>
#include <mutex>

#include "tessera/comm/mesh_comm.hpp"
#include "tessera/core/error.hpp"
#include "tessera/data/dataset.hpp"
#include "tessera/nn/trainer.hpp"
#include "tessera/sim/calibrate.hpp"
#include "tessera/sim/kernel_class.hpp"

namespace tessera::sim {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// The mean, less the times over kPreempted × the median: a step's time is a sum of calls, so it
/// is their means that add up. (A median, or a mean without the slowest calls, would leave out
/// the calls slowed by the other ranks' traffic through the shared caches and memory, which every
/// step pays: predictions came out 15-25% low on two ranks.) But a call that took several times
/// its median was preempted — another process had the core for a time slice, milliseconds on a
/// call of microseconds — and one such call in sixteen steps moved a calibration's prediction of
/// ConvNeXt-T's step by 20% from one calibration to the next.
constexpr double kPreempted = 3.0;
double mean(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  const double cap = kPreempted * median(v);
  double sum = 0;
  int n = 0;
  for (double x : v)
    if (x <= cap) sum += x, ++n;
  return sum / n;  // n ≥ 1: the median itself is at most the cap
}

/// Times every kernel call of a step. In the first recorded step it also notes each call's class
/// and cost (later steps issue the same calls in the same order).
class KernelClock final : public compute::Backend {
 public:
  explicit KernelClock(compute::Backend& inner) : inner_(inner), device_(inner.device_memory() != nullptr) {}
  std::string_view name() const noexcept override { return inner_.name(); }
  int num_threads() const noexcept override { return inner_.num_threads(); }
  void set_num_threads(int n) override { inner_.set_num_threads(n); }
  compute::Capabilities capabilities() const noexcept override { return inner_.capabilities(); }
  void execute(const compute::OpCall& call) override {
    if (device_) inner_.synchronize();  // a device's calls are timed from issue to completion
    const auto t0 = Clock::now();
    inner_.execute(call);
    if (device_) inner_.synchronize();
    const double t = seconds_since(t0);
    step_kernel_s += t;
    times.push_back(t);
    if (describe) {
      const compute::OpCost c = compute::op_cost(call);
      classes.push_back(kernel_class(call));
      costs.push_back({c.flops, static_cast<double>(c.bytes_read + c.bytes_written), 0, false, c.rows});
    }
  }
  bool describe = false;
  double step_kernel_s = 0;
  std::vector<double> times;  ///< this step's calls
  std::vector<std::string> classes;
  std::vector<KernelSample> costs;
  std::shared_ptr<core::DeviceMemory> device_memory() override { return inner_.device_memory(); }
  void synchronize() override { inner_.synchronize(); }

 private:
  compute::Backend& inner_;
  bool device_;
};

/// Small models of both families: depths 1,1,1,1, widths 8-16-24-32 and 32-64-96-128 on 3×64×256
/// and 24-48-72-96 on 3×32×128 (at least 64 columns per rank when sharded), batch 2, AdamW. The
/// widest one's activations outgrow a core's L2 cache, as those of real models do.
std::vector<nn::TrainOptions> reference_runs(int ranks) {
  std::vector<nn::TrainOptions> out;
  for (const char* family : {"convnext", "regnet"})
    for (int size = 0; size < 3; ++size) {
      nn::TrainOptions o;
      o.model.name = std::string("calibration-") + family;
      o.model.family = family;
      o.model.depths = {1, 1, 1, 1};
      o.model.widths = size == 0   ? std::vector<int>{8, 16, 24, 32}
                       : size == 1 ? std::vector<int>{24, 48, 72, 96}
                                   : std::vector<int>{32, 64, 96, 128};
      o.model.num_classes = 3;
      if (o.model.family == "regnet") {
        o.model.stem_width = size == 0 ? 8 : 16;
        o.model.group_width = 8;
        o.model.se_ratio = 0.25;
      }
      o.input = size == 1 ? core::Shape{3, 32, 128} : core::Shape{3, 64, 256};
      o.input[2] = std::max<std::int64_t>(o.input[2], 64 * ranks);
      o.batch = 2;
      o.steps = 1000;
      // Each batch loads in the step's own thread and is subtracted (data_time_s): no loader
      // thread competes with the kernels being timed.
      o.loader.prefetch = 0;
      o.optimizer.kind = "adamw";
      out.push_back(o);
    }
  return out;
}

/// One rank's figures for one reference run.
struct RankRun {
  std::vector<std::string> classes;
  std::vector<KernelSample> samples;  ///< per call: cost and the median time over the steps
  std::vector<double> host_per_call;  ///< per step
  std::vector<double> outside;        ///< per step: step − kernels − data loading
  double kernel_calls = 0;            ///< per step
};

/// Trains `o` on this rank: unsharded when `mesh` is null (then the host work is measured too),
/// else sharded over the mesh.
RankRun run_reference(const nn::TrainOptions& o, comm::MeshComm* mesh, compute::Backend& be, int warmup, int steps) {
  data::SyntheticOptions d;
  d.channels = static_cast<int>(o.input[0]), d.height = static_cast<int>(o.input[1]);
  d.width = static_cast<int>(o.input[2]), d.num_classes = o.model.num_classes;
  auto data = std::shared_ptr<const data::Dataset>(data::make_synthetic(d));
  KernelClock clock(be);
  const std::shared_ptr<core::DeviceMemory> memory = be.device_memory();  // null: host memory
  nn::Trainer trainer(o, mesh, clock,
                      memory ? std::make_shared<core::Allocator>("calibration", memory)
                             : std::make_shared<core::Allocator>("calibration"),
                      data);
  RankRun r;
  std::vector<std::vector<double>> per_call;  // [call][step]
  for (int s = 0; s < warmup + steps; ++s) {
    clock.describe = s == warmup;
    clock.times.clear();
    clock.step_kernel_s = 0;
    const nn::StepStats st = trainer.step();
    const double step = st.step_time_s;
    if (s < warmup) continue;
    per_call.resize(clock.times.size());
    for (std::size_t i = 0; i < clock.times.size(); ++i) per_call[i].push_back(clock.times[i]);
    // The describing step pays for its own bookkeeping; the others measure the host work (not in
    // a sharded run, whose steps also wait for the other ranks).
    const double outside = std::max(0.0, step - clock.step_kernel_s - st.data_time_s);
    if (s > warmup) r.outside.push_back(outside);
    if (s > warmup && !mesh) r.host_per_call.push_back(outside / static_cast<double>(clock.times.size()));
    r.kernel_calls = static_cast<double>(clock.times.size());
  }
  r.classes = clock.classes;
  r.samples = clock.costs;
  for (std::size_t i = 0; i < r.samples.size(); ++i) r.samples[i].seconds = mean(per_call[i]);
  return r;
}

/// The unsharded models `refs` again in each 16-bit precision of `precisions`: they set the
/// level of the "@bf16"/"@f16" classes' rates (anchor_to_steps).
std::vector<RankRun> run_half_references(const std::vector<nn::TrainOptions>& refs,
                                         const std::vector<nn::Precision>& precisions,
                                         comm::Backend& comm, compute::Backend& be, int warmup,
                                         int steps) {
  std::vector<RankRun> out;
  for (nn::Precision p : precisions) {
    if (p == nn::Precision::FP32) continue;
    for (nn::TrainOptions o : refs) {
      o.precision = p;
      comm.barrier();
      out.push_back(run_reference(o, nullptr, be, warmup, steps));
    }
  }
  return out;
}

/// The 16-bit runs' samples of 16-bit classes. Their host work and f32 calls (optimizer, loss
/// reductions) are left out, so that the f32 figures stay those of the f32 runs.
void add_half_samples(const std::vector<std::vector<RankRun>>& halves, RuntimeCalibration& out) {
  for (const auto& rank : halves)
    for (const RankRun& run : rank)
      for (std::size_t i = 0; i < run.samples.size(); ++i)
        if (run.classes[i].find('@') != std::string::npos) {
          KernelSample s = run.samples[i];
          s.in_step = true;
          out.samples[run.classes[i]].push_back(s);
        }
}

}  // namespace

RuntimeCalibration measure_runtime(const ComputeFactory& make_compute, const WorldRunner& run_world,
                                   const CalibrateOptions& options, const CalibrateLog& log) {
  const auto t_start = Clock::now();
  const int warmup = 2, steps = options.quick ? 6 : 16;
  const std::vector<nn::TrainOptions> refs = reference_runs(options.ranks);
  std::vector<std::vector<RankRun>> runs(options.ranks);    // [rank][run]
  std::vector<std::vector<RankRun>> halves(options.ranks);  // [rank][run]: in 16-bit precisions
  std::mutex mu;
  run_world(options.ranks, [&](comm::Backend& comm) {
    std::unique_ptr<compute::Backend> be = make_compute(options.threads);
    std::vector<RankRun> mine;
    // Each rank trains its own unsharded model, all at the same time (as the ranks of a run share
    // the machine); with several ranks, then the same models sharded over them (W), whose
    // convolutions also compute narrow border windows.
    for (const nn::TrainOptions& o : refs) {
      comm.barrier();
      mine.push_back(run_reference(o, nullptr, *be, warmup, steps));
    }
    if (options.ranks > 1) {
      comm::MeshComm mesh(core::DeviceMesh({options.ranks}, {"sp"}), comm);
      for (const nn::TrainOptions& o : refs) {
        comm.barrier();
        mine.push_back(run_reference(o, &mesh, *be, warmup, steps));
        // Per step the slowest rank's time outside kernels (a run's step lasts as long as its
        // slowest rank's): with one rank per process, this process learns the others' here.
        std::vector<double>& out = mine.back().outside;
        comm.all_reduce({out.data(), out.size(), core::DType::F64}, comm::ReduceOp::Max)->wait();
      }
    }
    std::vector<RankRun> mine_half =
        run_half_references(refs, options.precisions, comm, *be, warmup, steps);
    std::lock_guard<std::mutex> lock(mu);
    runs[comm.rank()] = std::move(mine);
    halves[comm.rank()] = std::move(mine_half);
  });
  RuntimeCalibration out;
  std::vector<double> host;
  for (const auto& rank : runs)
    for (const RankRun& run : rank) {
      for (std::size_t i = 0; i < run.samples.size(); ++i) {
        KernelSample s = run.samples[i];
        s.in_step = true;
        out.samples[run.classes[i]].push_back(s);
      }
      host.insert(host.end(), run.host_per_call.begin(), run.host_per_call.end());
    }
  out.host_overhead_s = median(host);
  add_half_samples(halves, out);
  // The ranks that ran here: all with ranks as threads; with one rank per process (a calibration
  // under `tessera launch`) this process's own (its times outside kernels are already the
  // slowest rank's, step by step).
  std::vector<const std::vector<RankRun>*> here;
  for (const auto& rank : runs)
    if (!rank.empty()) here.push_back(&rank);
  if (options.ranks > 1)
    for (std::size_t i = 0; i < refs.size(); ++i) {
      const std::size_t run = refs.size() + i;  // the sharded runs follow the unsharded ones
      std::vector<double> slowest;
      for (std::size_t s = 0; s < (*here[0])[run].outside.size(); ++s) {
        double m = 0;
        for (const auto* rank : here) m = std::max(m, (*rank)[run].outside[s]);
        slowest.push_back(m);
      }
      RuntimeCalibration::ShardedRun sr;
      sr.options = refs[i];
      sr.ranks = options.ranks;
      sr.outside_s = median(slowest);
      sr.kernel_calls = (*here[0])[run].kernel_calls;
      for (const KernelSample& k : (*here[0])[run].samples) sr.kernel_s += k.seconds;
      out.sharded.push_back(sr);
    }
  if (log)
    log(detail::cat("runtime: ", here[0]->size(), " reference runs on ", options.ranks, " rank(s); ",
                    out.host_overhead_s * 1e6, " us of host work per kernel call (", seconds_since(t_start), " s)"));
  return out;
}

}  // namespace tessera::sim
