// measure_kernels: times the kernel suite (calibrate_cases.cpp) on one or more ranks at once and
// fits each kernel class's rate (fit_kernel_rate).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>

#include "calibrate_cases.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"
#include "tessera/sim/calibrate.hpp"
#include "tessera/sim/kernel_class.hpp"

namespace tessera::sim {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// Forwards every call and keeps the last one's kernel class and cost (the replay's formulas).
class Probe final : public compute::Backend {
 public:
  explicit Probe(compute::Backend& inner) : inner_(inner) {}
  std::string_view name() const noexcept override { return inner_.name(); }
  int num_threads() const noexcept override { return inner_.num_threads(); }
  void set_num_threads(int n) override { inner_.set_num_threads(n); }
  compute::Capabilities capabilities() const noexcept override { return inner_.capabilities(); }
  void execute(const compute::OpCall& call) override {
    kernel = kernel_class(call);
    cost = compute::op_cost(call);
    inner_.execute(call);
  }
  std::shared_ptr<core::DeviceMemory> device_memory() override { return inner_.device_memory(); }
  void synchronize() override { inner_.synchronize(); }
  std::string kernel;
  compute::OpCost cost;

 private:
  compute::Backend& inner_;
};

/// Sets of a case's tensors fill at least this many bytes (up to kMaxSets sets), so that each
/// call finds its inputs in the shared cache or memory, as in a training step, rather than in the
/// core's own caches where the previous repetition left them.
constexpr double kRotateBytes = 4.0 * (1 << 20);
constexpr int kMaxSets = 64;
/// And at least this many sets: in a training step the data a large call reads was written
/// several calls of its own size earlier (the layers between a tensor's producer and its
/// consumers, the forward pass between an activation and its gradient), so a call of tens of
/// megabytes finds its operands in memory, not in the shared cache. Timed again and again on one
/// set, such a call runs up to twice as fast as in the step (docs/simulator.md).
constexpr int kMinSets = 8;

/// The median time of one call of case `c`: the first call (through `probe`) gives its class and
/// cost, a pass over every set warms them up, then `reps` samples, each of as many calls (cycling
/// through the sets) as fill about 20 µs, so that the clock's cost does not count for tiny kernels.
double time_call(const detail_calibrate::TimedCall& c, compute::Backend& be, Probe& probe, int reps) {
  std::vector<detail_calibrate::Call> sets{c.make()};
  sets[0](probe);
  const double bytes = static_cast<double>(probe.cost.bytes_read + probe.cost.bytes_written);
  const int n = static_cast<int>(std::clamp(std::ceil(kRotateBytes / std::max(bytes, 1.0)), double(kMinSets), double(kMaxSets)));
  while (static_cast<int>(sets.size()) < n) sets.push_back(c.make());
  for (auto& s : sets) s(be);
  // A device backend runs the calls asynchronously: the clock reads after synchronize() (a no-op
  // on the host), so a sample is the calls' time on the device plus one synchronisation.
  std::size_t next = 0;
  be.synchronize();
  double t0 = now_s();
  for (int i = 0; i < n; ++i) sets[next++ % sets.size()](be);
  be.synchronize();
  const double one = (now_s() - t0) / n;
  const int batch = one >= 20e-6 ? 1 : static_cast<int>(std::min(256.0, std::ceil(20e-6 / std::max(one, 1e-8))));
  std::vector<double> ts;
  for (int r = 0; r < reps; ++r) {
    be.synchronize();
    t0 = now_s();
    for (int b = 0; b < batch; ++b) sets[next++ % sets.size()](be);
    be.synchronize();
    ts.push_back((now_s() - t0) / batch);
  }
  return median(ts);
}

/// The suite in every precision of `options`, f32 first.
std::vector<detail_calibrate::TimedCall> suite_of(const CalibrateOptions& options,
                                                  const core::AllocatorPtr& device) {
  std::vector<detail_calibrate::TimedCall> suite;
  for (nn::Precision p : options.precisions) {
    std::vector<detail_calibrate::TimedCall> part = detail_calibrate::kernel_suite(
        options.quick, device, nn::precision_dtype(p, core::DType::F32));
    suite.insert(suite.end(), std::make_move_iterator(part.begin()),
                 std::make_move_iterator(part.end()));
  }
  return suite;
}

}  // namespace

void check_precisions(const std::vector<nn::Precision>& precisions) {
  std::string names;
  for (nn::Precision p : precisions)
    names += (names.empty() ? "" : ",") + std::string(nn::precision_name(p));
  for (std::size_t i = 0; i < precisions.size(); ++i)
    TESSERA_CHECK(std::find(precisions.begin(), precisions.begin() + i, precisions[i]) ==
                      precisions.begin() + i,
                  "calibration: precisions '", names, "' list ", nn::precision_name(precisions[i]),
                  " twice");
  TESSERA_CHECK(
      std::find(precisions.begin(), precisions.end(), nn::Precision::FP32) != precisions.end(),
      "calibration: precisions '", names,
      "' must include fp32 (every calibration times the f32 "
      "kernels); e.g. fp32,bf16");
}

KernelRate fit_kernel_rate(const std::vector<KernelSample>& samples, double near_bytes) {
  TESSERA_CHECK(!samples.empty(), "calibration: no samples to fit a kernel rate to");
  // Features 1, FLOPs, bytes, rows and far bytes (each scaled to at most 1), weights 1/t²
  // (relative error).
  constexpr int kTerms = 5;
  double fmax = 0, bmax = 0, rmax = 0, xmax = 0;
  auto far = [&](const KernelSample& p) { return near_bytes > 0 ? std::max(0.0, p.bytes - near_bytes) : 0.0; };
  for (const KernelSample& p : samples) {
    TESSERA_CHECK(p.seconds > 0 && p.flops >= 0 && p.bytes >= 0 && p.rows >= 0, "calibration: a sample has time ",
                  p.seconds, ", FLOPs ", p.flops, ", bytes ", p.bytes, " and rows ", p.rows);
    fmax = std::max(fmax, p.flops), bmax = std::max(bmax, p.bytes), rmax = std::max(rmax, p.rows);
    xmax = std::max(xmax, far(p));
  }
  auto feature = [&](const KernelSample& p, int j) {
    switch (j) {
      case 0: return 1.0;
      case 1: return fmax > 0 ? p.flops / fmax : 0.0;
      case 2: return bmax > 0 ? p.bytes / bmax : 0.0;
      case 3: return rmax > 0 ? p.rows / rmax : 0.0;
      default: return xmax > 0 ? far(p) / xmax : 0.0;
    }
  };
  // Non-negative least squares by trying every set of free coefficients. The sets are tried
  // with the bytes term before the FLOPs term, the rows term after them and the far term last,
  // and a later set must fit strictly better: an elementwise kernel, whose FLOPs are a multiple
  // of its bytes, keeps a bytes rate, and the far term is taken only where the large calls need it.
  std::vector<int> order = {1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};  // bits: overhead, FLOPs, bytes, rows
  if (xmax > 0)
    for (int i = 0, n = static_cast<int>(order.size()); i < n; ++i) order.push_back(order[i] | 16);
  double best_residual = -1, best[kTerms] = {0, 0, 0, 0, 0};
  for (int set : order) {
    std::vector<int> free;
    for (int j = 0; j < kTerms; ++j)
      if (set & (1 << j)) free.push_back(j);
    const int n = static_cast<int>(free.size());
    double a[kTerms][kTerms + 1] = {};  // normal equations, augmented
    for (const KernelSample& p : samples) {
      const double w = 1.0 / (p.seconds * p.seconds);
      for (int r = 0; r < n; ++r) {
        for (int c = 0; c < n; ++c) a[r][c] += w * feature(p, free[r]) * feature(p, free[c]);
        a[r][n] += w * feature(p, free[r]) * p.seconds;
      }
    }
    bool ok = true;
    for (int c = 0; c < n && ok; ++c) {  // Gaussian elimination with partial pivoting
      int piv = c;
      for (int r = c + 1; r < n; ++r)
        if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
      if (std::abs(a[piv][c]) < 1e-12 * (std::abs(a[0][0]) + 1e-300)) ok = false;
      if (!ok) break;
      std::swap(a[c], a[piv]);
      for (int r = 0; r < n; ++r) {
        if (r == c) continue;
        const double f = a[r][c] / a[c][c];
        for (int k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
      }
    }
    if (!ok) continue;
    double coef[kTerms] = {0, 0, 0, 0, 0};
    for (int r = 0; r < n; ++r) {
      coef[free[r]] = a[r][n] / a[r][r];
      ok = ok && coef[free[r]] >= 0;
    }
    if (!ok) continue;
    double residual = 0;
    for (const KernelSample& p : samples) {
      double t = 0;
      for (int j = 0; j < kTerms; ++j) t += coef[j] * feature(p, j);
      residual += (t / p.seconds - 1) * (t / p.seconds - 1);
    }
    if (best_residual < 0 || residual < best_residual * (1 - 1e-9)) {
      best_residual = residual;
      std::copy(coef, coef + kTerms, best);
    }
  }
  KernelRate r;
  r.overhead_s = best[0];
  r.flops_per_s = best[1] > 0 && fmax > 0 ? fmax / best[1] : 0;
  r.bytes_per_s = best[2] > 0 && bmax > 0 ? bmax / best[2] : 0;
  r.row_s = rmax > 0 ? best[3] / rmax : 0;
  r.far_bytes_per_s = best[4] > 0 && xmax > 0 ? xmax / best[4] : 0;
  r.near_bytes = near_bytes;
  return r;
}

std::map<std::string, KernelCalibration> measure_kernels(const ComputeFactory& make_compute,
                                                         const WorldRunner& run_world,
                                                         const CalibrateOptions& options,
                                                         const CalibrateLog& log) {
  TESSERA_CHECK(options.ranks >= 1 && options.threads >= 1, "calibration: ranks ", options.ranks, " and threads ",
                options.threads, " must be at least 1");
  check_precisions(options.precisions);
  const double t0 = now_s();
  const int reps = options.quick ? 9 : 25;
  std::vector<std::vector<double>> times(options.ranks);
  std::vector<std::string> kernels;
  std::vector<compute::OpCost> costs;
  std::mutex mu;
  bool on_device = false;
  run_world(options.ranks, [&](comm::Backend& comm) {
    const int r = comm.rank();
    std::unique_ptr<compute::Backend> be = make_compute(options.threads);
    Probe probe(*be);
    // A device backend's kernels take tensors in its memory.
    const std::shared_ptr<core::DeviceMemory> memory = be->device_memory();
    const core::AllocatorPtr device =
        memory ? std::make_shared<core::Allocator>("calibration", memory) : nullptr;
    const std::vector<detail_calibrate::TimedCall> suite = suite_of(options, device);
    std::vector<double> mine(suite.size());
    std::vector<std::string> classes(suite.size());
    std::vector<compute::OpCost> cs(suite.size());
    for (std::size_t i = 0; i < suite.size(); ++i) {
      comm.barrier();  // the ranks time the same kernel at the same time
      mine[i] = time_call(suite[i], *be, probe, reps);
      classes[i] = probe.kernel;
      cs[i] = probe.cost;
    }
    std::lock_guard<std::mutex> lock(mu);
    on_device = on_device || memory != nullptr;
    times[r] = std::move(mine);
    if (kernels.empty()) {  // every rank times the same suite
      kernels = std::move(classes);
      costs = std::move(cs);
    }
  });
  // The mean over the ranks that ran here: all of them with ranks as threads, this process's own
  // with one rank per process (a calibration under `tessera launch`).
  std::map<std::string, KernelCalibration> out;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    double t = 0;
    int ranks_here = 0;
    for (const auto& rank_times : times)
      if (!rank_times.empty()) t += rank_times[i], ++ranks_here;
    KernelSample s;
    s.flops = costs[i].flops;
    s.bytes = static_cast<double>(costs[i].bytes_read + costs[i].bytes_written);
    s.rows = costs[i].rows;
    s.seconds = t / ranks_here;
    out[kernels[i]].samples.push_back(s);
  }
  // Beyond a core's L2 a call's operands come from the shared cache or memory (the far term).
  // Not on a device: its kernels stream through one large shared cache either way.
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const double near = on_device ? 0.0 : l2 > 0 ? static_cast<double>(l2) : double(1 << 20);
  for (auto& [k, c] : out) c.rate = fit_kernel_rate(c.samples, near);
  if (log)
    log(detail::cat("kernels: ", kernels.size(), " calls of ", out.size(), " classes on ", options.ranks,
                    " rank(s) × ", options.threads, " thread(s), ", reps, " repetitions, in ", now_s() - t0, " s"));
  return out;
}

}  // namespace tessera::sim
