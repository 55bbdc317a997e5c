// bench_sim: how long the simulator takes to predict one training iteration of ConvNeXt-XL
// (depths 3,3,27,3, dims 256,512,1024,2048; AdamW, fp32, 1000 classes; batch 7 per dp replica;
// input 3x512x4096) on 8, 64, 512 and 1024 GPUs of dgx-a100:N (mesh dp x sp, sp = 8 by
// default), split into its three parts: building the topology, replaying the trainer on meta
// tensors (replay_folded: one replay per class of symmetric ranks) and the event engine (one
// slab of ranks per kind simulated, the others mirrored). Every repetition starts cold (a fresh
// topology, so routes are computed again); the engine builds no trace, as in the planner. Reported
// as median [min-max] over --reps runs after
// one warm-up run, with the folding figures (classes, simulated ranks) and the prediction itself.
// The training options, catalog and engine options come from the run layer (run::resolve_sim),
// as for `tessera sim run`; the parts are then timed one by one.
// Each row also gives the process's peak resident memory while it ran (VmHWM, reset per row
// through /proc/self/clear_refs), the issue-34 target for its GPU count where there is one
// (1,024 GPUs < 0.2 s, 8,192 < 1 s, 16,384 < 2 s cold; < 1 GB at 16,384), and, up to
// --exact-max GPUs, the exact engine's prediction and time (EngineKind::Exact: every rank,
// route and collective group on its own) with the fast one's relative difference.
#include <malloc.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "tessera/core/version.hpp"
#include "tessera/run/resolve.hpp"
#include "tessera/sim/fold.hpp"
#include "tessera/sim/units.hpp"

namespace tessera::bench {
namespace {

struct Options {
  bool json = false;
  int reps = 5;
  int sp = 8;
  std::vector<int> gpus = {64, 1024, 8192, 16384};
  std::string cluster = "dgx-a100";  // multi-node preset family: dgx-a100, dgx-h100, hgx-h200
  std::string checkpointing = "none";
  int exact_max = 1024;  ///< run the exact engine on rows of at most this many GPUs
};

struct Row {
  int gpus = 0, dp = 0;
  std::string topology, mesh;
  Stats topo_ms, replay_ms, engine_ms, total_ms, warm_ms;  // wall clock
  Stats total_cpu_ms;                                      // this thread's CPU time
  int classes = 0, simulated = 0;
  double iteration_s = 0, peak_gb = 0;
  double peak_rss_mb = 0;
  double exact_ms = -1, exact_iteration_s = 0;
};

/// Resets the process's peak resident set (VmHWM) to its current size (Linux: clear_refs 5), after
/// handing the heap's free memory back (an earlier row's, kept by malloc, would count again).
void reset_peak_rss() {
  malloc_trim(0);
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

/// The process's peak resident set since the last reset, in MB (1e6 bytes); 0 if unknown.
double peak_rss_mb() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  double kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) kb = std::atof(line + 6);
  std::fclose(f);
  return kb * 1024 / 1e6;
}

/// The issue-34 wall-clock target for a cold prediction on `gpus` GPUs, in ms (0: none).
double target_ms(int gpus) {
  return gpus == 1024 ? 200 : gpus == 8192 ? 1000 : gpus == 16384 ? 2000 : 0;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// CPU time of the calling thread in ms (the wall clock also counts other processes' turns on a
/// shared machine).
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

/// The run description of one row, resolved by the run layer as `tessera sim run` resolves its
/// options (clip 0 as before: no gradient-norm ops in the optimizer step).
run::SimSetup xl(const Options& o, const Row& row) {
  run::RunSpec s = run::RunSpec::for_simulation();
  s.model = "convnext-xl";
  s.input = "3x512x4096";
  s.batch = 7 * row.dp;
  s.mesh = row.mesh;
  s.shard = "W";
  s.checkpointing = o.checkpointing;
  s.optimizer = "adamw";
  s.warmup = 0;
  s.clip = 0;
  s.topology = row.topology;
  return run::resolve_sim(s);
}

Row measure(const Options& o, int gpus) {
  reset_peak_rss();
  Row row;
  row.gpus = gpus;
  row.dp = gpus / o.sp;
  row.topology = o.cluster + ":" + std::to_string(std::max(1, gpus / 8));
  row.mesh = "dp=" + std::to_string(row.dp) + ",sp=" + std::to_string(o.sp);
  const run::SimSetup setup = xl(o, row);
  const nn::TrainOptions& t = setup.train;
  const core::DeviceMesh& mesh = setup.mesh;
  const sim::DeviceCatalog& catalog = setup.catalog;
  sim::EngineOptions no_trace = setup.engine;  // the prediction only, as the planner runs it
  no_trace.trace = false;
  no_trace.collective_links = false;
  std::vector<double> topo, replay, engine, total, warm, cpu;
  for (int rep = 0; rep <= o.reps; ++rep) {  // rep 0 warms up
    const double c0 = thread_cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    const sim::Topology topology = sim::Topology::preset(row.topology);
    const double t_topo = ms_since(t0);
    const auto t1 = std::chrono::steady_clock::now();
    const sim::FoldedReplay f = sim::replay_folded(t, mesh);
    const double t_replay = ms_since(t1);
    const auto t2 = std::chrono::steady_clock::now();
    const sim::SimResult r = sim::simulate_iteration(f, topology, catalog, no_trace);
    const double t_engine = ms_since(t2);
    const double c_total = thread_cpu_ms() - c0;
    // The engine again on the same topology: its routes are cached now (what the planner sees
    // after its first configuration).
    const auto t3 = std::chrono::steady_clock::now();
    sim::simulate_iteration(f, topology, catalog, no_trace);
    const double t_warm = ms_since(t3);
    if (rep == 0) {
      row.classes = static_cast<int>(f.classes.size());
      row.simulated = r.simulated_ranks;
      row.iteration_s = static_cast<double>(r.iteration_ps) / sim::kPicosPerSecond;
      for (const sim::DeviceResult& d : r.devices)
        row.peak_gb = std::max(row.peak_gb, d.memory.peak_total / 1e9);
      continue;
    }
    topo.push_back(t_topo);
    replay.push_back(t_replay);
    engine.push_back(t_engine);
    total.push_back(t_topo + t_replay + t_engine);
    warm.push_back(t_warm);
    cpu.push_back(c_total);
  }
  row.topo_ms = stats_of(topo);
  row.replay_ms = stats_of(replay);
  row.engine_ms = stats_of(engine);
  row.total_ms = stats_of(total);
  row.warm_ms = stats_of(warm);
  row.total_cpu_ms = stats_of(cpu);
  row.peak_rss_mb = peak_rss_mb();  // before the exact engine, which keeps every rank
  if (gpus <= o.exact_max) {
    sim::EngineOptions exact = no_trace;
    exact.engine = sim::EngineKind::Exact;
    const auto t0 = std::chrono::steady_clock::now();
    const sim::Topology topology = sim::Topology::preset(row.topology);
    const sim::SimResult r =
        sim::simulate_iteration(sim::replay_folded(t, mesh), topology, catalog, exact);
    row.exact_ms = ms_since(t0);
    row.exact_iteration_s = static_cast<double>(r.iteration_ps) / sim::kPicosPerSecond;
  }
  return row;
}

std::string cell(const Stats& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f [%.0f-%.0f]", s.median, s.min, s.max);
  return buf;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      o.json = true;
    } else if (a == "--exact-max" && i + 1 < argc) {
      o.exact_max = std::atoi(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      o.reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--sp" && i + 1 < argc) {
      o.sp = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--cluster" && i + 1 < argc) {
      o.cluster = argv[++i];
    } else if (a == "--checkpointing" && i + 1 < argc) {
      o.checkpointing = argv[++i];
    } else if (a == "--gpus" && i + 1 < argc) {
      o.gpus.clear();
      for (const char* s = argv[++i]; *s; s += (*s == ','))
        o.gpus.push_back(static_cast<int>(std::strtol(s, const_cast<char**>(&s), 10)));
    } else {
      std::fprintf(stderr,
                   "usage: bench_sim [--json] [--reps N] [--gpus 64,1024,8192,16384] [--sp 8] "
                   "[--cluster dgx-a100|dgx-h100|hgx-h200] [--checkpointing none|block|stage] "
                   "[--exact-max N]\n"
                   "  wall-clock time of the simulator predicting one ConvNeXt-XL iteration\n"
                   "  (3x512x4096, batch 7 per dp replica, AdamW), split into topology,\n"
                   "  replay and engine; median [min-max] over --reps cold runs (default 5)\n"
                   "  after one warm-up\n"
                   "  --gpus: the GPU counts simulated (default 64,1024,8192,16384), mesh dp x sp\n"
                   "  --sp: the spatial shards per replica (default 8)\n"
                   "  --cluster: the multi-node preset family, <cluster>:N (default dgx-a100)\n"
                   "  --checkpointing none|block|stage: activation checkpointing (default none)\n"
                   "  --exact-max N: also run the exact engine on rows of at most N GPUs (default\n"
                   "    1024; 0: never) and give the fast prediction's difference from it\n"
                   "  --json: one JSON object on stdout instead of the table\n");
      std::exit(a == "--help" ? 0 : 2);
    }
  }
  return o;
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::vector<Row> rows;
  for (int g : o.gpus) {
    if (g % o.sp != 0 || (g > 8 && g % 8 != 0)) {
      std::fprintf(stderr, "bench_sim: %d GPUs is not a multiple of sp=%d and of 8 GPUs per node\n",
                   g, o.sp);
      return 2;
    }
    rows.push_back(measure(o, g));
  }
  if (o.json) {
    std::vector<std::string> items;
    for (const Row& r : rows) {
      Json j;
      j.num("gpus", r.gpus)
          .str("topology", r.topology)
          .str("mesh", r.mesh)
          .num("classes", r.classes);
      j.num("simulated_ranks", r.simulated)
          .num("iteration_time_s", r.iteration_s)
          .num("peak_memory_gb", r.peak_gb);
      j.stats("topology_ms_", r.topo_ms)
          .stats("replay_ms_", r.replay_ms)
          .stats("engine_ms_", r.engine_ms);
      j.stats("total_ms_", r.total_ms)
          .stats("total_cpu_ms_", r.total_cpu_ms)
          .stats("engine_warm_ms_", r.warm_ms);
      j.num("peak_rss_mb", r.peak_rss_mb);
      if (target_ms(r.gpus) > 0)
        j.num("target_total_ms", target_ms(r.gpus))
            .raw("meets_target", r.total_ms.median < target_ms(r.gpus) ? "true" : "false");
      if (r.gpus == 16384)
        j.num("target_peak_rss_mb", 1000)
            .raw("meets_rss_target", r.peak_rss_mb < 1000 ? "true" : "false");
      if (r.exact_ms >= 0)
        j.num("exact_ms", r.exact_ms)
            .num("exact_iteration_time_s", r.exact_iteration_s)
            .num("fast_vs_exact_rel", (r.iteration_s - r.exact_iteration_s) / r.exact_iteration_s);
      items.push_back(j.str());
    }
    Json top;
    top.str("tessera_version", std::string(tessera::core::version()))
        .str("build", tessera::core::build_description());
    top.str("bench", "sim")
        .str("model", "convnext-xl")
        .str("input", "3x512x4096")
        .num("batch_per_replica", 7);
    top.str("checkpointing", o.checkpointing).raw("runs", json_array(items));
    std::printf("%s\n", top.str().c_str());
    return 0;
  }
  std::printf("%s\n", tessera::core::version_line().c_str());
  std::printf(
      "bench_sim: ConvNeXt-XL, input 3x512x4096, batch 7 per dp replica, AdamW fp32, checkpointing "
      "%s\n",
      o.checkpointing.c_str());
  std::printf(
      "time to simulate one iteration, ms, median [min-max] of %d cold runs (a fresh topology "
      "each: "
      "total = topology + replay + engine), wall clock and CPU\n",
      o.reps);
  std::printf("%5s  %-13s %-12s %4s %4s  %-10s %-12s %-16s %-16s %-16s %-14s %9s %7s %8s  %s\n",
              "GPUs", "topology", "mesh", "cls", "sim", "topo ms", "replay ms", "engine ms",
              "total ms", "total cpu ms", "warm engine", "iteration", "peak GB", "RSS MB",
              "target / exact engine");
  for (const Row& r : rows) {
    std::printf("%5d  %-13s %-12s %4d %4d  %-10s %-12s %-16s %-16s %-16s %-14s %8.3fs %7.2f",
                r.gpus, r.topology.c_str(), r.mesh.c_str(), r.classes, r.simulated,
                cell(r.topo_ms).c_str(), cell(r.replay_ms).c_str(), cell(r.engine_ms).c_str(),
                cell(r.total_ms).c_str(), cell(r.total_cpu_ms).c_str(), cell(r.warm_ms).c_str(),
                r.iteration_s, r.peak_gb);
    std::printf(" %8.0f ", r.peak_rss_mb);
    if (target_ms(r.gpus) > 0)
      std::printf(" total < %.0f ms: %s", target_ms(r.gpus),
                  r.total_ms.median < target_ms(r.gpus) ? "met" : "MISSED");
    if (r.gpus == 16384)
      std::printf(", RSS < 1000 MB: %s", r.peak_rss_mb < 1000 ? "met" : "MISSED");
    if (r.exact_ms >= 0)
      std::printf(" exact %.3fs in %.0f ms (fast %+.4f%%)", r.exact_iteration_s, r.exact_ms,
                  100 * (r.iteration_s - r.exact_iteration_s) / r.exact_iteration_s);
    std::printf("\n");
  }
  std::printf(
      "cls: replays (one per class of symmetric ranks); sim: ranks the engine ran (the others "
      "mirror "
      "them); warm engine: the engine again on the same topology, its routes cached; RSS MB: the\n"
      "process's peak resident memory during the row; exact engine: EngineKind::Exact (every "
      "rank,\n"
      "route and group on its own), once, with the fast prediction's difference from it\n");
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) { return tessera::bench::run(argc, argv); }
