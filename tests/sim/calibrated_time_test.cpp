// The calibrated simulator against the runtime: calibrate this machine, then for three
// small configurations (ConvNeXt sp=1 and sp=2, RegNetY sp=2; one thread per rank) measure the
// real step time on local ranks and simulate the same step with the calibrated figures. Both are
// printed with a per-kernel-class breakdown; where the machine was quiet enough to measure, they
// must agree within 15%. Run `tessera_tests_sim "the calibrated simulation*"` to see the figures.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "nn/train_harness.hpp"
#include "support/catch.hpp"
#include "sim_test_util.hpp"
#include "tessera/sim/calibrate.hpp"
#include "tessera/sim/kernel_class.hpp"

using namespace tessera;

namespace {

nn::TrainOptions small_run(const std::string& family) {
  nn::TrainOptions o = simtest::small_run(family);
  o.steps = 1000;
  // Batches load in the step (a copy of a cached one, subtracted as data time): no loader thread
  // takes cycles from the kernels the simulator is compared against.
  o.loader.prefetch = 0;
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Serves copies of the first batch each rank loaded. The synthetic loader draws its shapes on the
// host in every step (about 7% of a step here), work that a training input pipeline does
// elsewhere and that the simulator does not model; a copy of a cached batch is what remains.
class CachedDataset final : public data::Dataset {
 public:
  explicit CachedDataset(std::shared_ptr<const data::Dataset> inner) : inner_(std::move(inner)) {}
  data::Task task() const noexcept override { return inner_->task(); }
  int num_classes() const noexcept override { return inner_->num_classes(); }
  core::Shape image_shape() const override { return inner_->image_shape(); }
  std::int64_t size() const noexcept override { return inner_->size(); }
  void load_into(std::span<const std::int64_t>, const core::Layout& layout, int rank, data::Batch& b) const override {
    data::Batch cached;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(rank);
      if (it == cache_.end()) it = cache_.emplace(rank, inner_->load(0, layout, rank, nullptr)).first;
      cached = it->second;
    }
    b.images.copy_from(cached.images);
    b.labels.copy_from(cached.labels);
  }

 private:
  std::shared_ptr<const data::Dataset> inner_;
  mutable std::mutex mu_;
  mutable std::map<int, data::Batch> cache_;
};

using ClassTimes = std::map<std::string, double>;  // kernel class → seconds per step

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Times every kernel call by class (wall clock around execute) while `on`, to compare with the
// simulated kernel times.
class ClassTimer final : public compute::Backend {
 public:
  explicit ClassTimer(compute::Backend& inner) : inner_(inner) {}
  std::string_view name() const noexcept override { return inner_.name(); }
  int num_threads() const noexcept override { return inner_.num_threads(); }
  void set_num_threads(int n) override { inner_.set_num_threads(n); }
  void execute(const compute::OpCall& call) override {
    if (!on) return inner_.execute(call);
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_s();
    inner_.execute(call);
    const double c = thread_cpu_s() - c0;
    times[sim::kernel_class(call)] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu[sim::kernel_class(call)] += c;
  }
  bool on = false;
  ClassTimes times, cpu;

 private:
  compute::Backend& inner_;
};

struct Measured {
  std::vector<double> steps, cpu, clean;  // per step: the slowest rank's time and CPU time; the
                                          // times of the steps in which the ranks together
                                          // waited for a core less than 2% of the step
  ClassTimes rank0, rank0_cpu;  // rank 0's kernel time (wall, CPU) per class, per step
  double step_s() const { return median(steps); }
  double step_cpu_s() const { return median(cpu); }
  double clean_step_s() const { return clean.empty() ? 0.0 : median(clean); }
  int clean_steps() const { return static_cast<int>(clean.size()); }
  /// Both measurements' steps (the breakdown is `later`'s).
  static Measured merge(const Measured& earlier, const Measured& later) {
    Measured m = later;
    m.steps.insert(m.steps.end(), earlier.steps.begin(), earlier.steps.end());
    m.cpu.insert(m.cpu.end(), earlier.cpu.begin(), earlier.cpu.end());
    m.clean.insert(m.clean.end(), earlier.clean.begin(), earlier.clean.end());
    return m;
  }
};

// Seconds this thread has spent runnable but not running (waiting for a core that another
// process held): the second field of /proc/thread-self/schedstat. -1 where it cannot be read.
double runqueue_wait_s() {
  std::FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  if (!f) return -1;
  unsigned long long run = 0, wait = 0;
  const int n = std::fscanf(f, "%llu %llu", &run, &wait);
  std::fclose(f);
  return n == 2 ? 1e-9 * static_cast<double>(wait) : -1;
}


// Trains on mesh.size() local ranks with one compute thread each: `warmup` steps, `steps` timed
// steps, then `breakdown` steps with the per-class kernel timer on (its cost stays out of the
// step times).
Measured measure(const nn::TrainOptions& o, const core::DeviceMesh& mesh, int warmup, int steps, int breakdown) {
  const int P = mesh.size();
  auto ds = std::make_shared<CachedDataset>(test::dataset_for(o));
  std::vector<std::vector<double>> times(steps, std::vector<double>(P)), cpu_times = times, waits = times;
  Measured m;
  comm::local::run(P, [&](comm::Backend& world) {
    const int rank = world.rank();
    comm::MeshComm mc(mesh, world);
    auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(rank));
    compute::cpu::CpuBackend cpu(1);
    ClassTimer timer(cpu);
    nn::Trainer t(o, &mc, timer, alloc, ds);
    for (int s = 0; s < warmup + steps + breakdown; ++s) {
      world.barrier();
      timer.on = s >= warmup + steps;
      const double c0 = thread_cpu_s(), w0 = runqueue_wait_s();
      const double dt = t.step().step_time_s;
      if (s >= warmup && s < warmup + steps) {
        times[s - warmup][rank] = dt;
        cpu_times[s - warmup][rank] = thread_cpu_s() - c0;
        waits[s - warmup][rank] = runqueue_wait_s() - w0;
      }
    }
    if (rank == 0 && breakdown > 0) {
      for (auto& [k, v] : timer.times) v /= breakdown;
      for (auto& [k, v] : timer.cpu) v /= breakdown;
      m.rank0 = timer.times;
      m.rank0_cpu = timer.cpu;
    }
  });
  for (int s = 0; s < steps; ++s) {
    double wait = 0;
    for (double w : waits[s]) wait += w;
    const double step = *std::max_element(times[s].begin(), times[s].end());
    m.steps.push_back(step);
    m.cpu.push_back(*std::max_element(cpu_times[s].begin(), cpu_times[s].end()));
    if (wait >= 0 && wait < 0.02 * step) m.clean.push_back(step);
  }
  return m;
}

struct Config {
  std::string family;
  int sp;
};

/// One configuration's figures in one attempt (calibration and measurement back to back).
struct Outcome {
  Measured real;
  double simulated_s = 0, simulated_compute_s = 0, share = 1;
  ClassTimes simulated_kernels;  // rank 0, per step, including the host work per call
  double clean_error() const { return simulated_s / real.clean_step_s() - 1; }
};

Measured measure_config(const Config& cfg, int breakdown) {
  return measure(small_run(cfg.family), core::DeviceMesh({cfg.sp}, {"sp"}), 2, 10, breakdown);
}

Outcome simulate_config(const Config& cfg, const sim::Calibration& cal, Measured real) {
  const nn::TrainOptions o = small_run(cfg.family);
  const core::DeviceMesh mesh({cfg.sp}, {"sp"});
  Outcome out;
  out.real = std::move(real);
  sim::DeviceCatalog catalog;
  sim::EngineOptions eo;
  sim::apply_calibration(cal, catalog, eo);
  const std::vector<sim::RankReplay> replay = sim::replay_all(o, mesh);
  const sim::Topology topo = sim::Topology::preset("cpu-host:" + std::to_string(cfg.sp), catalog);
  const sim::SimResult r = sim::simulate_iteration(replay, topo, catalog, eo);
  out.simulated_s = static_cast<double>(r.iteration_ps) / sim::kPicosPerSecond;
  out.share = cal.cpu_share;
  for (const sim::DeviceResult& d : r.devices)
    out.simulated_compute_s = std::max(out.simulated_compute_s, static_cast<double>(d.compute_busy_ps) / 1e12);
  for (const sim::ProgramOp& op : replay[0].program)
    if (op.kind == sim::ProgramOp::Kind::Compute)
      out.simulated_kernels[op.kernel] +=
          static_cast<double>(sim::kernel_time_ps(op, catalog.get("cpu-host"), eo)) / sim::kPicosPerSecond;
  return out;
}

void print_breakdown(const Outcome& o) {
  std::printf("  %-34s %10s %10s %10s\n", "kernel class (rank 0, per step)", "wall", "cpu", "simulated");
  double m = 0, c = 0, s = 0;
  for (const auto& [k, t] : o.simulated_kernels) {
    const double wall = o.real.rank0.count(k) ? o.real.rank0.at(k) : 0.0;
    const double cpu = o.real.rank0_cpu.count(k) ? o.real.rank0_cpu.at(k) : 0.0;
    m += wall, c += cpu, s += t;
    std::printf("  %-34s %7.3f ms %7.3f ms %7.3f ms\n", k.c_str(), wall * 1e3, cpu * 1e3, t * 1e3);
  }
  std::printf("  %-34s %7.3f ms %7.3f ms %7.3f ms  (simulated: with the host work per call)\n", "all kernels",
              m * 1e3, c * 1e3, s * 1e3);
}

constexpr int kMinCleanSteps = 3;
constexpr int kAttempts = 5;          // for the one-rank configuration (a calibration takes ~4 s)
constexpr int kAttemptsTwoRanks = 3;  // for the two-rank ones (~8 s)
constexpr int kExtraAttempts = 6;     // at most, per rank count, where the median is off
constexpr double kExtraBudgetS = 150;  // and only while the extra ones have taken less than this

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * x);
  return buf;
}

}  // namespace

// Attempts, each: measure the sp=1 run, calibrate (full) on one rank, measure it again; the same
// for the sp=2 runs with a calibration on two ranks (kAttempts and kAttemptsTwoRanks of them).
// A step counts when its ranks together waited for a core that another process held for less
// than 2% of it: the simulation predicts a machine that runs nothing else. An attempt counts with
// at least kMinCleanSteps such steps; a configuration's error is the median over the attempts
// that count. Where that median is off by more than 15%, up to kExtraAttempts more attempts of
// that rank count are made (while the extra attempts have taken less than kExtraBudgetS: the
// first ones take 100-150 s, more on a slower machine, which must not leave none) and the median
// is taken over all of them: a burst of load from elsewhere spoils a minority of attempts, a
// wrong model spoils all. On a machine too busy for
// any attempt to count, the figures are printed and the test ends with ctest's skip status,
// naming the configurations not compared. The test runs alone (RUN_SERIAL, label timing).
TEST_CASE("the calibrated simulation predicts the measured step time within 15%", "[sim][calibration][timing]") {
  const sim::ComputeFactory make_compute = [](int threads) { return std::make_unique<compute::cpu::CpuBackend>(threads); };
  const sim::WorldRunner run_world = [](int size, const std::function<void(comm::Backend&)>& fn) {
    comm::local::run(size, fn);
  };
  const std::vector<Config> configs = {{"convnext", 1}, {"convnext", 2}, {"regnet", 2}};
  std::vector<std::vector<Outcome>> outcomes(configs.size());
  const auto attempt = [&](int ranks) {
    sim::CalibrateOptions co;
    co.quick = false;
    co.ranks = ranks;
    // Measure, calibrate, measure again: the steps of both measurements bracket the calibration.
    std::vector<Measured> before(configs.size());
    for (std::size_t c = 0; c < configs.size(); ++c)
      if (configs[c].sp == ranks) before[c] = measure_config(configs[c], 0);
    const sim::Calibration cal = sim::calibrate(make_compute, run_world, co);
    for (std::size_t c = 0; c < configs.size(); ++c)
      if (configs[c].sp == ranks)
        outcomes[c].push_back(
            simulate_config(configs[c], cal, Measured::merge(before[c], measure_config(configs[c], 4))));
  };
  // The attempts that count for configuration c, sorted by error; the median is the middle one.
  const auto counted = [&](std::size_t c) {
    std::vector<const Outcome*> out;
    for (const Outcome& o : outcomes[c])
      if (o.real.clean_steps() >= kMinCleanSteps) out.push_back(&o);
    std::sort(out.begin(), out.end(),
              [](const Outcome* a, const Outcome* b) { return a->clean_error() < b->clean_error(); });
    return out;
  };
  const auto off = [&](int ranks) {
    for (std::size_t c = 0; c < configs.size(); ++c) {
      if (configs[c].sp != ranks) continue;
      const auto n = counted(c);
      if (n.empty() || std::abs(n[n.size() / 2]->clean_error()) > 0.15) return true;
    }
    return false;
  };
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  for (int a = 0; a < kAttempts; ++a)
    for (int ranks : {1, 2})
      if (ranks == 1 || a < kAttemptsTwoRanks) attempt(ranks);
  const double first_s = elapsed_s();
  for (int ranks : {1, 2})
    for (int extra = 0; extra < kExtraAttempts && off(ranks) && elapsed_s() - first_s < kExtraBudgetS; ++extra)
      attempt(ranks);
  std::string not_compared;   // configurations no attempt could measure cleanly
  bool compared_ok = true;    // every configuration that was compared is within 15%
  for (std::size_t c = 0; c < configs.size(); ++c) {
    const Config& cfg = configs[c];
    std::printf("calibrated time: %s 16-32-48-64 depths 1-1-2-1, 3x64x256, batch 2, AdamW, sp=%d, 1 thread per "
                "rank, local ranks\n", cfg.family.c_str(), cfg.sp);
    for (const Outcome& o : outcomes[c]) {
      const Measured& m = o.real;
      std::printf("  attempt: simulated %7.3f ms; measured %7.3f ms over %2d clean steps (%s), %7.3f ms over all %d; "
                  "rank cpu %7.3f ms, simulated compute %7.3f ms; cpu share while calibrating %.2f\n",
                  o.simulated_s * 1e3, m.clean_step_s() * 1e3, m.clean_steps(),
                  m.clean_steps() >= kMinCleanSteps ? percent(o.clean_error()).c_str() : "too few",
                  m.step_s() * 1e3, static_cast<int>(m.steps.size()), m.step_cpu_s() * 1e3,
                  o.simulated_compute_s * 1e3, o.share);
    }
    const std::vector<const Outcome*> n = counted(c);
    if (n.empty()) {
      print_breakdown(outcomes[c].back());
      not_compared += (not_compared.empty() ? "" : ", ") + cfg.family + " sp=" + std::to_string(cfg.sp);
      continue;
    }
    const Outcome& mid = *n[n.size() / 2];
    print_breakdown(mid);
    std::printf("  median of %zu attempts: measured %.3f ms, simulated %.3f ms (%+.1f%%)\n", n.size(),
                mid.real.clean_step_s() * 1e3, mid.simulated_s * 1e3, 100 * mid.clean_error());
    INFO(cfg.family << " sp=" << cfg.sp << ": measured " << mid.real.clean_step_s() << " s, simulated "
                    << mid.simulated_s << " s (median of " << n.size() << " attempts)");
    const bool within = std::abs(mid.clean_error()) <= 0.15;
    compared_ok = compared_ok && within;
    CHECK(within);
  }
  // A configuration that could not be measured is a check not made: the test reports ctest's skip
  // status, unless a configuration that was compared failed (a failure must stay a failure).
  if (!not_compared.empty() && compared_ok)
    TESSERA_SKIP("not compared: " << not_compared << ": in no attempt did " << kMinCleanSteps
                                  << " steps run without waiting for a core that another process held "
                                     "(the machine is busy); run again on an idle machine");
}
