// calibrate: the link between two in-process ranks (batch_p2p exchanges and all_reduces), the
// FP32 FMA peak, memory bandwidth and launch overhead, and the device entry and topology built
// from them and the kernel rates (calibrate_kernels.cpp).
#include "tessera/sim/calibrate.hpp"

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "tessera/compute/ops.hpp"
#include "tessera/sim/engine.hpp"
#include "tessera/sim/replay.hpp"
#include "tessera/core/error.hpp"

namespace tessera::sim {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

template <class F>
double median_time(int reps, F&& f) {
  std::vector<double> ts;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_s();
    f();
    ts.push_back(now_s() - t0);
  }
  return median(ts);
}

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

double clamp_eff(double e) { return std::clamp(e, 1e-4, 1.0); }

}  // namespace

LinkCalibration measure_link(const WorldRunner& run_world, const CalibrateOptions& options,
                             const CalibrateLog& log) {
  const double t0 = now_s();
  const std::vector<std::size_t> sizes = options.quick
                                             ? std::vector<std::size_t>{1024, 16384, 262144, 1 << 20}
                                             : std::vector<std::size_t>{256, 4096, 65536, 262144, 1 << 20, 4 << 20};
  const int reps = options.quick ? 15 : 41;
  // Per rank: with ranks as threads rank 0's figures are taken; with one rank per process (a
  // calibration under `tessera launch`), this process's own.
  std::vector<std::vector<KernelSample>> p2p_of(2), ar_of(2);
  run_world(2, [&](comm::Backend& c) {
    const std::size_t most = sizes.back() / 4;
    std::vector<float> send(most, 1.0f), recv(most), buf(most, 1.0f);
    const int peer = 1 - c.rank();
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const std::size_t n = sizes[i] / 4;
      auto exchange = [&] {
        const std::vector<comm::P2POp> ops = {
            {comm::P2POp::Kind::Send, {send.data(), n}, peer, 0},
            {comm::P2POp::Kind::Recv, {recv.data(), n}, peer, 0}};
        c.batch_p2p(ops)->wait();
      };
      auto reduce = [&] { c.all_reduce({buf.data(), n}, comm::ReduceOp::Sum)->wait(); };
      for (int w = 0; w < 3; ++w) exchange();
      c.barrier();
      const double t_p2p = median_time(reps, exchange);
      for (int w = 0; w < 3; ++w) reduce();
      c.barrier();
      const double t_ar = median_time(reps, reduce);
      p2p_of[static_cast<std::size_t>(c.rank())].push_back({0, static_cast<double>(sizes[i]), t_p2p});
      ar_of[static_cast<std::size_t>(c.rank())].push_back({0, static_cast<double>(sizes[i]), t_ar});
    }
  });
  const std::size_t mine = p2p_of[0].empty() ? 1 : 0;
  const std::vector<KernelSample>& p2p = p2p_of[mine];
  const std::vector<KernelSample>& ar = ar_of[mine];
  const KernelRate a = fit_kernel_rate(p2p), b = fit_kernel_rate(ar);
  LinkCalibration l;
  l.p2p_latency_s = a.overhead_s;
  l.p2p_bw_bytes_per_s = a.bytes_per_s;
  l.all_reduce_latency_s = b.overhead_s;
  l.all_reduce_bw_bytes_per_s = b.bytes_per_s;
  if (log)
    log(detail::cat("link: batch_p2p exchange ", l.p2p_latency_s * 1e6, " us + bytes / ", l.p2p_bw_bytes_per_s / 1e9,
                    " GB/s; all_reduce ", l.all_reduce_latency_s * 1e6, " us + bytes / ",
                    l.all_reduce_bw_bytes_per_s / 1e9, " GB/s (", now_s() - t0, " s)"));
  return l;
}

double measure_fma_peak(bool quick) {
  // 12 independent accumulators of 8 floats: enough FMAs in flight to hide their latency, few
  // enough to stay in registers. Every iteration is 12·8 FMAs = 192 FLOPs. Timed in thread CPU
  // time: the peak is the core's, whatever else the machine runs.
  using V = float __attribute__((vector_size(32)));
  constexpr int kAcc = 12;
  const long iters = quick ? 1'000'000 : 4'000'000;
  double best = 0;
  for (int rep = 0; rep < (quick ? 3 : 5); ++rep) {
    V acc[kAcc];
    for (int j = 0; j < kAcc; ++j) acc[j] = V{} + 1.0f + 0.001f * static_cast<float>(j + rep);
    volatile float va = 0.999999f, vb = 1e-6f;  // unknown to the optimiser: no constant folding
    const V a = V{} + va, b = V{} + vb;
    const double t0 = thread_cpu_s();
    for (long i = 0; i < iters; ++i)
#pragma GCC unroll 12
      for (int j = 0; j < kAcc; ++j) acc[j] = acc[j] * a + b;
    const double dt = thread_cpu_s() - t0;
    V total = acc[0];
    for (int j = 1; j < kAcc; ++j) total += acc[j];
    volatile float sink = total[0] + total[1] + total[2] + total[3] + total[4] + total[5] + total[6] + total[7];
    (void)sink;
    if (dt > 0) best = std::max(best, static_cast<double>(iters) * kAcc * 8 * 2 / dt);
  }
  return best;
}

double measure_cpu_share(int threads, double seconds) {
  TESSERA_CHECK(threads >= 1 && seconds > 0, "calibration: cpu share of ", threads, " threads over ", seconds, " s");
  std::vector<double> share(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&share, t, seconds] {
      const double w0 = now_s(), c0 = thread_cpu_s();
      volatile std::uint64_t spin = 0;
      while (now_s() - w0 < seconds)
        for (int i = 0; i < 1000; ++i) spin = spin + 1;
      share[t] = (thread_cpu_s() - c0) / (now_s() - w0);
    });
  for (auto& th : pool) th.join();
  double sum = 0;
  for (double s : share) sum += s;
  return std::clamp(sum / threads, 0.01, 1.0);
}

WorldRunner job_world_runner(comm::Backend& world) {
  return [&world](int size, const std::function<void(comm::Backend&)>& fn) {
    TESSERA_CHECK(size <= world.size(), "calibrate: a measurement needs ", size, " ranks; the job has ", world.size());
    if (size == world.size()) return fn(world);
    std::vector<int> first(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) first[static_cast<std::size_t>(r)] = r;
    std::unique_ptr<comm::Backend> sub = world.split(first);  // every rank takes part
    if (sub) fn(*sub);
    world.barrier();
  };
}

// The suite times each kernel on its own, again and again, with its operands hot in the caches;
// in a training step the same kernel finds them cold (the previous layer's output, a gradient
// written long ago) and runs slower. The fit over both sets takes its shape (how time grows with
// FLOPs and bytes) from the suite's wide range of sizes; its level is then set by the steps: the
// rate is scaled by measured / predicted summed over the in-step samples. (A sum, not a median
// of ratios: a step's time is a sum of calls, dominated by the large ones that no longer fit a
// core's cache.)
void anchor_to_steps(KernelCalibration& kc) {
  double measured = 0, predicted = 0;
  for (const KernelSample& s : kc.samples)
    if (s.in_step) measured += s.seconds, predicted += kc.rate.seconds(s.flops, s.bytes, s.rows);
  if (measured <= 0 || predicted <= 0) return;
  const double f = measured / predicted;
  kc.rate.overhead_s *= f;
  kc.rate.flops_per_s /= f;
  kc.rate.bytes_per_s /= f;
  kc.rate.row_s *= f;
  kc.rate.far_bytes_per_s /= f;
}

namespace {

/// One rank-sharded reference run simulated on cpu-host:<ranks> under the calibration `c`.
SimResult simulate_reference(const Calibration& c, const RuntimeCalibration::ShardedRun& run,
                             const std::vector<RankReplay>& replay) {
  DeviceCatalog catalog;
  EngineOptions eo;
  apply_calibration(c, catalog, eo);
  eo.trace = false;
  return simulate_iteration(replay, Topology::preset("cpu-host:" + std::to_string(run.ranks), catalog), catalog, eo);
}

}  // namespace

WaitCosts fit_wait_costs(const Calibration& c, const RuntimeCalibration& runtime) {
  struct Row {
    double excess, p2p, coll, weight;  // excess ≈ p2p_s · p2p + collective_s · coll
  };
  std::vector<Row> rows;
  for (const RuntimeCalibration::ShardedRun& run : runtime.sharded) {
    const core::DeviceMesh mesh({run.ranks}, {"sp"});
    const std::vector<RankReplay> replay = replay_all(run.options, mesh);
    Calibration without = c;
    without.waits = {};
    const SimResult r = simulate_reference(without, run, replay);
    Picos busy = 0;
    for (const DeviceResult& d : r.devices) busy = std::max(busy, d.compute_busy_ps);
    const double simulated_outside = static_cast<double>(r.iteration_ps - busy) / kPicosPerSecond;
    Row row{0, 0, 0, 0};
    for (const ProgramOp& op : replay[0].program)
      if (op.kind == ProgramOp::Kind::Compute)
        for (int d : op.deps) {
          row.p2p += replay[0].program[d].kind == ProgramOp::Kind::P2P;
          row.coll += replay[0].program[d].kind == ProgramOp::Kind::Collective;
        }
    // The measured time outside kernels holds the host work too, which the simulation books
    // inside its kernels.
    row.excess = run.outside_s - c.host_overhead_s * run.kernel_calls - simulated_outside;
    row.weight = 1 / std::max(run.outside_s * run.outside_s, 1e-18);
    if (row.p2p + row.coll > 0) rows.push_back(row);
  }
  // Non-negative least squares in two unknowns: both free, then each alone; the best fit wins.
  WaitCosts best;
  double best_residual = -1;
  auto consider = [&](double a, double b) {
    if (a < 0 || b < 0) return;
    double res = 0;
    for (const Row& r : rows) res += r.weight * (r.excess - a * r.p2p - b * r.coll) * (r.excess - a * r.p2p - b * r.coll);
    if (best_residual < 0 || res < best_residual) best_residual = res, best = {a, b};
  };
  double spp = 0, scc = 0, spc = 0, spe = 0, sce = 0;
  for (const Row& r : rows) {
    spp += r.weight * r.p2p * r.p2p, scc += r.weight * r.coll * r.coll, spc += r.weight * r.p2p * r.coll;
    spe += r.weight * r.p2p * r.excess, sce += r.weight * r.coll * r.excess;
  }
  consider(0, 0);
  if (spp > 0) consider(spe / spp, 0);
  if (scc > 0) consider(0, sce / scc);
  const double det = spp * scc - spc * spc;
  if (std::abs(det) > 1e-12 * std::max(spp * scc, 1e-300)) consider((spe * scc - sce * spc) / det, (sce * spp - spe * spc) / det);
  return best;
}

Calibration calibrate(const ComputeFactory& make_compute, const WorldRunner& run_world,
                      const CalibrateOptions& options, const CalibrateLog& log) {
  const double t0 = now_s();
  Calibration c;
  c.threads_per_rank = options.threads;
  c.concurrent_ranks = options.ranks;
  c.quick = options.quick;
  check_precisions(options.precisions);
  c.precisions = options.precisions;
  c.host = host_name();
  c.created_utc = utc_now();
  const double probe_s = options.quick ? 0.1 : 0.3;
  // Each rank spins its threads at once, as a run's ranks compute at once; with one rank per
  // process this process measures its own.
  auto cpu_share = [&] {
    std::mutex mu;
    std::vector<double> shares;
    run_world(options.ranks, [&](comm::Backend& comm) {
      comm.barrier();
      const double s = measure_cpu_share(options.threads, probe_s);
      std::lock_guard<std::mutex> lock(mu);
      shares.push_back(s);
    });
    double sum = 0;
    for (double s : shares) sum += s;
    return shares.empty() ? 1.0 : sum / static_cast<double>(shares.size());
  };
  const double share_before = cpu_share();
  c.kernels = measure_kernels(make_compute, run_world, options, log);
  c.link = measure_link(run_world, options, log);
  const RuntimeCalibration runtime = measure_runtime(make_compute, run_world, options, log);
  c.host_overhead_s = runtime.host_overhead_s;
  for (const auto& [k, samples] : runtime.samples) {
    KernelCalibration& kc = c.kernels[k];
    kc.samples.insert(kc.samples.end(), samples.begin(), samples.end());
    kc.rate = fit_kernel_rate(kc.samples, kc.rate.near_bytes);
    anchor_to_steps(kc);
  }

  DeviceSpec& d = c.device;
  std::unique_ptr<compute::Backend> device_be = make_compute(options.threads);
  const std::shared_ptr<core::DeviceMemory> device_memory = device_be->device_memory();
  double peak = 0;  // what the class efficiencies are taken against
  if (device_memory) {
    // A GPU: the catalog's entry of its model with the measured figures.
    const DeviceMeasurement m = measure_device(*device_be, options.quick);
    c.device_copy = m.copy;
    const std::string model = device_model_name(m.copy.memory);
    const DeviceCatalog builtin;
    const std::string entry = catalog_device_for(model, builtin);
    if (!entry.empty()) d = builtin.get(entry);
    d.name = entry.empty() ? "cuda-" + model : entry;
    d.kind = "gpu";
    d.mem_bw_bytes_per_s = std::round(m.copy.d2d_bw_bytes_per_s);
    d.launch_overhead_s = m.launch_overhead_s + c.host_overhead_s;
    d.shm_bw_bytes_per_s = 0;
    d.shm_latency_s = 0;
    peak = options.tf32 && d.peak_tf32_flops > 0 ? d.peak_tf32_flops : d.peak_fp32_flops;
    if (d.capacity_bytes <= 0) {  // "... 139 GiB)" when the catalog has no entry
      const auto gib = m.copy.memory.rfind(", ");
      d.capacity_bytes = gib == std::string::npos ? 0 : std::atof(m.copy.memory.c_str() + gib + 2) * double(1ull << 30);
    }
    if (log)
      log(detail::cat("device ", m.copy.memory, " as catalog entry ", d.name, entry.empty() ? " (no catalog entry for " + model + ")" : "",
                      ": copy ", m.copy.d2d_bw_bytes_per_s / 1e9, " GB/s device to device (read + written), ",
                      m.copy.h2d_bw_bytes_per_s / 1e9, " GB/s host to device, ", m.copy.d2h_bw_bytes_per_s / 1e9,
                      " GB/s device to host; ", m.launch_overhead_s * 1e6, " us per launch"));
  } else {
    d.name = "cpu-host";
    d.kind = "cpu";
    d.peak_fp32_flops = std::round(measure_fma_peak(options.quick) * options.threads);
    peak = d.peak_fp32_flops;
    {
      compute::Backend* be = device_be.get();
      const std::int64_t n = options.quick ? (4 << 20) : (16 << 20);  // 3 arrays well past the caches
      core::Tensor x = core::Tensor::zeros({n}), y = core::Tensor::zeros({n}), z = core::Tensor::zeros({n});
      compute::add(*be, x, y, z);
      const double t = median_time(options.quick ? 3 : 7, [&] { compute::add(*be, x, y, z); });
      d.mem_bw_bytes_per_s = std::round(3.0 * 4.0 * static_cast<double>(n) / t);
      core::Tensor one = core::Tensor::zeros({1});
      for (int i = 0; i < 100; ++i) compute::scale(*be, 1.0, one);
      d.launch_overhead_s =
          median_time(options.quick ? 101 : 1001, [&] { compute::scale(*be, 1.0, one); }) + c.host_overhead_s;
    }
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    d.capacity_bytes = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 16e9;
  }
  // The roofline's class efficiencies (for kernels without a measured rate): what the largest
  // sample of a representative class achieved.
  auto achieved = [&](const char* k, bool flops) {
    const auto it = c.kernels.find(k);
    if (it == c.kernels.end() || it->second.samples.empty()) return 0.0;
    const KernelSample* big = &it->second.samples.front();
    for (const KernelSample& s : it->second.samples)
      if (s.flops + s.bytes > big->flops + big->bytes) big = &s;
    return (flops ? big->flops : big->bytes) / big->seconds;
  };
  d.eff_gemm = clamp_eff(achieved("conv2d_forward/pointwise", true) / peak);
  d.eff_depthwise = clamp_eff(achieved("conv2d_forward/depthwise", true) / peak);
  d.eff_elementwise = clamp_eff(achieved("add", false) / d.mem_bw_bytes_per_s);
  if (device_memory) {
    d.source = detail::cat("tessera calibrate --device cuda on ", c.host, " at ", c.created_utc, ": cuda-",
                           device_model_name(c.device_copy.memory), " = ", c.device_copy.memory, ", tf32 ",
                           options.tf32 ? "on" : "off", ", ", options.ranks, " rank(s) timing kernels at once",
                           options.quick ? ", quick" : "", "; peaks and capacity from the catalog");
  } else {
    d.shm_bw_bytes_per_s = std::round(c.link.p2p_bw_bytes_per_s);
    d.shm_latency_s = c.link.p2p_latency_s;
    d.source = detail::cat("tessera calibrate on ", c.host, " at ", c.created_utc, ": ", options.threads,
                           " thread(s) per rank, ", options.ranks, " rank(s) timing kernels at once",
                           options.quick ? ", quick" : "");
  }
  c.cpu_share = 0.5 * (share_before + cpu_share());
  DeviceCatalog catalog;
  catalog.add(d);
  c.topology = Topology::preset("cpu-host:2", catalog);
  c.waits = fit_wait_costs(c, runtime);
  if (log)
    for (const RuntimeCalibration::ShardedRun& run : runtime.sharded) {
      const SimResult r = simulate_reference(c, run, replay_all(run.options, core::DeviceMesh({run.ranks}, {"sp"})));
      const double measured = run.kernel_s + run.outside_s, simulated = static_cast<double>(r.iteration_ps) / kPicosPerSecond;
      Picos busy = 0;
      for (const DeviceResult& d : r.devices) busy = std::max(busy, d.compute_busy_ps);
      const double sim_kernels = static_cast<double>(busy) / kPicosPerSecond;
      log(detail::cat("reference ", run.options.model.family, " ", run.options.model.widths.front(), "-",
                      run.options.model.widths.back(), " on ", run.ranks, " ranks: measured ", measured * 1e3, " ms (",
                      run.kernel_s * 1e3, " in kernels, ", run.outside_s * 1e3, " outside), simulated ", simulated * 1e3,
                      " ms (", sim_kernels * 1e3, " in kernels, ", (simulated - sim_kernels) * 1e3, " outside): ",
                      100 * (simulated / measured - 1), "%"));
    }
  if (log)
    log(detail::cat("device: FP32 FMA peak ", d.peak_fp32_flops / 1e9, " GFLOP/s, add ", d.mem_bw_bytes_per_s / 1e9,
                    " GB/s, launch overhead (a tiny kernel and the host work) ", d.launch_overhead_s * 1e6,
                    " us; a wait costs ", c.waits.p2p_s * 1e6, " us (halo exchange) and ", c.waits.collective_s * 1e6,
                    " us (collective); each thread got ", 100 * c.cpu_share, "% of a core; calibration took ", now_s() - t0,
                    " s"));
  return c;
}

}  // namespace tessera::sim
