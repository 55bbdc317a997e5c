// `tessera plan`: ranks the ways to train a model on a cluster — dp × spatial meshes, shard
// dimension, checkpointing, precision, gradient compression — by simulated iteration time, with
// each one's replayed peak memory against the device capacity or --memory-cap (sim::plan does the
// work).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "spec_options.hpp"
#include "tessera/nn/precision.hpp"
#include "tessera/run/resolve.hpp"
#include "tessera/sim/planner.hpp"
#include "tessera/sim/units.hpp"

namespace tessera::tools {

namespace {

run::RunSpec plan_defaults() {
  run::RunSpec s = run::RunSpec::for_simulation();
  s.model = "convnext-xl";
  s.input = "3x512x4096";
  s.batch = 7;
  s.topology = "dgx-a100:2";
  s.mesh = "sp=1";  // the planner chooses the mesh; this only validates model and input
  return s;
}

struct PlanArgs {
  SpecOptions spec{plan_defaults()};
  std::string memory_cap;
  std::string shards = "W,H,HW";
  std::string checkpointing = "none,block,stage";
  std::string precisions;  ///< empty: the run description's precision (--precision, fp32)
  std::string compressions;  ///< empty: the run description's one (--grad-compression, none)
  int devices = 0;
  int bucket_mib = 4;
  int top = 0;
  bool json = false;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

void print_json(const run::RunSpec& spec, const sim::PlanOptions& o, const sim::Topology& topo,
                const sim::PlanResult& r) {
  std::printf(
      "{\"model\": %s, \"input\": %s, \"batch\": %d, \"topology\": %s, \"devices\": %d, "
      "\"memory_cap_bytes\": %.0f, \"best_fit\": %d,\n \"configurations\": [",
      quoted(o.train.model.name).c_str(), quoted(spec.input).c_str(), o.train.batch,
      quoted(topo.name).c_str(), r.devices, o.memory_cap_bytes, r.best_fit());
  for (std::size_t i = 0; i < r.entries.size(); ++i) {
    const sim::PlanEntry& e = r.entries[i];
    std::printf(
        "%s\n  {\"mesh\": %s, \"shard\": %s, \"checkpointing\": %s, \"precision\": %s, "
        "\"compression\": %s, \"iteration_time_s\": %.9g, "
        "\"images_per_s\": %.6g, \"peak_memory_bytes\": %zu, \"activation_peak_bytes\": %zu, "
        "\"limit_bytes\": %.0f, \"fits\": %s, \"compute_busy_s\": %.9g, \"comm_busy_s\": %.9g, "
        "\"replayed_ranks\": %d}",
        i ? "," : "", quoted(e.config.mesh).c_str(), quoted(e.config.shard).c_str(),
        quoted(e.config.checkpointing).c_str(), quoted(e.config.precision).c_str(),
        quoted(e.config.compression).c_str(), e.iteration_s,
        e.images_per_s, e.peak_bytes, e.activation_peak_bytes, e.limit_bytes,
        e.fits ? "true" : "false", e.compute_busy_s, e.comm_busy_s, e.classes);
  }
  std::printf("],\n \"skipped\": [");
  for (std::size_t i = 0; i < r.skipped.size(); ++i)
    std::printf(
        "%s\n  {\"mesh\": %s, \"shard\": %s, \"checkpointing\": %s, \"precision\": %s, "
        "\"compression\": %s, \"reason\": %s}",
        i ? "," : "", quoted(r.skipped[i].config.mesh).c_str(),
        quoted(r.skipped[i].config.shard).c_str(),
        quoted(r.skipped[i].config.checkpointing).c_str(),
        quoted(r.skipped[i].config.precision).c_str(), quoted(r.skipped[i].config.compression).c_str(),
        quoted(r.skipped[i].reason).c_str());
  std::printf("]");
  const sim::CompressionVerdict v = r.compression_verdict();
  if (v.compared > 0)
    std::printf(",\n \"compression_verdict\": {\"topk_ratio\": %.9g, \"compared\": %d, \"topk_faster\": %d, "
                "\"best_saving\": %.9g, \"worst_saving\": %.9g, \"best_dense\": %d, \"best_topk\": %d}",
                o.train.topk_ratio, v.compared, v.faster, v.best_saving, v.worst_saving, v.best_dense, v.best_topk);
  std::printf("}\n");
}

int run_plan(const PlanArgs& a) {
  const run::RunSpec spec = a.spec.spec();
  const run::SimSetup setup = run::resolve_sim(spec);
  sim::PlanOptions o;
  o.train = setup.train;
  o.devices = a.devices;
  o.shards = split_list(a.shards);
  o.checkpointing = split_list(a.checkpointing);
  // --precisions lists the precisions to compare; without it, the description's one precision.
  TESSERA_CHECK(a.precisions.empty() || nn::parse_precision(spec.precision) == nn::Precision::FP32,
                "--precision ", spec.precision, " and --precisions '", a.precisions,
                "': give one (--precisions ", spec.precision, " plans in ", spec.precision,
                " alone)");
  o.precisions =
      a.precisions.empty() ? std::vector<std::string>{spec.precision} : split_list(a.precisions);
  // --compressions likewise: the gradient compressions to compare (none, topk).
  TESSERA_CHECK(a.compressions.empty() || spec.grad_compression == "none", "--grad-compression ",
                spec.grad_compression, " and --compressions '", a.compressions, "': give one (--compressions ",
                spec.grad_compression, " plans with ", spec.grad_compression, " alone)");
  o.compressions = a.compressions.empty() ? std::vector<std::string>{spec.grad_compression}
                                          : split_list(a.compressions);
  const bool show_compression = o.compressions != std::vector<std::string>{"none"};
  for (const std::string& s : o.shards)
    TESSERA_CHECK(s == "W" || s == "H" || s == "HW", "--shards '", a.shards,
                  "': list W, H and/or HW");
  if (!a.memory_cap.empty())
    o.memory_cap_bytes = static_cast<double>(sim::parse_byte_size(a.memory_cap));
  TESSERA_CHECK(a.memory_cap.empty() || o.memory_cap_bytes > 0, "--memory-cap '", a.memory_cap,
                "': give a positive size such as 80GB");
  o.engine = setup.engine;
  const sim::DeviceCatalog& catalog = setup.catalog;
  const sim::Topology& topo = setup.topology;
  const auto t0 = std::chrono::steady_clock::now();
  const sim::PlanResult r = sim::plan(o, topo, catalog);
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (a.json) {
    print_json(spec, o, topo, r);
    return 0;
  }
  std::printf("plan: %s, input %s, global batch %d, %s, %s on %d devices of %s\n",
              o.train.model.name.c_str(), spec.input.c_str(), o.train.batch,
              o.train.optimizer.kind.c_str(), o.train.overlap ? "overlap" : "no overlap", r.devices,
              topo.name.c_str());
  if (o.memory_cap_bytes > 0)
    std::printf("memory cap %.2f GB per device\n", o.memory_cap_bytes / 1e9);
  std::printf(
      "%d configurations simulated, %zu skipped, in %.1f s; sorted by predicted iteration time "
      "(GB = 1e9 bytes; peak = the largest rank's replayed peak)\n",
      static_cast<int>(r.entries.size()), r.skipped.size(), took_s);
  std::printf("%4s  %-22s %-5s %-6s %-5s %s%11s %9s %9s %9s  %-4s %10s %10s\n", "#", "mesh", "shard",
              "ckpt", "prec", show_compression ? "grads " : "", "iteration", "images/s", "peak GB", "activ GB",
              "fit", "compute", "comm");
  const int best = r.best_fit();
  for (std::size_t i = 0; i < r.entries.size(); ++i) {
    if (a.top > 0 && static_cast<int>(i) >= a.top && static_cast<int>(i) != best) continue;
    const sim::PlanEntry& e = r.entries[i];
    const std::string grads = show_compression ? (e.config.compression == "topk" ? "topk  " : "dense ") : "";
    std::printf("%4zu  %-22s %-5s %-6s %-5s %s%11s %9.3f %9.2f %9.2f  %-4s %10s %10s%s\n", i + 1,
                e.config.mesh.c_str(), e.config.shard.c_str(), e.config.checkpointing.c_str(),
                e.config.precision.c_str(), grads.c_str(),
                sim::format_duration(static_cast<sim::Picos>(e.iteration_s * 1e12)).c_str(),
                e.images_per_s, e.peak_bytes / 1e9, e.activation_peak_bytes / 1e9,
                e.fits ? "ok" : "OOM",
                sim::format_duration(static_cast<sim::Picos>(e.compute_busy_s * 1e12)).c_str(),
                sim::format_duration(static_cast<sim::Picos>(e.comm_busy_s * 1e12)).c_str(),
                static_cast<int>(i) == best ? "  <- fastest that fits" : "");
  }
  if (best < 0)
    std::printf("no configuration fits: try more devices, a smaller batch or a larger cap\n");
  const sim::CompressionVerdict v = r.compression_verdict();
  if (v.compared > 0) {
    std::printf("top-k gradient compression (ratio %g, error feedback) against the dense all-reduce: faster in %d of "
                "%d configurations simulated both ways (saving %+.1f%% at best, %+.1f%% at worst: its selection, "
                "scatter-add and residual cost compute, its all_gather saves bytes)\n",
                o.train.topk_ratio, v.faster, v.compared, 100 * v.best_saving, 100 * v.worst_saving);
    if (v.best_dense >= 0 && v.best_topk >= 0) {
      const double d = r.entries[std::size_t(v.best_dense)].iteration_s, t = r.entries[std::size_t(v.best_topk)].iteration_s;
      std::printf("verdict: %s: the fastest plan that fits with top-k takes %s against %s dense (%+.1f%%)\n",
                  t < d ? "top-k pays here" : "top-k does not pay here",
                  sim::format_duration(static_cast<sim::Picos>(t * 1e12)).c_str(),
                  sim::format_duration(static_cast<sim::Picos>(d * 1e12)).c_str(), 100 * (t / d - 1));
    } else {
      std::printf("verdict: none: %s\n", v.best_dense < 0 && v.best_topk < 0 ? "no plan fits either way"
                                         : v.best_topk < 0                  ? "no top-k plan fits"
                                                                            : "no dense plan fits");
    }
  } else if (std::find(o.compressions.begin(), o.compressions.end(), "topk") != o.compressions.end() &&
             o.compressions.size() > 1) {
    std::printf("top-k gradient compression: no configuration was simulated both ways (see skipped)\n");
  }
  if (!r.skipped.empty()) {
    std::printf("skipped:\n");
    for (const sim::PlanSkip& s : r.skipped)
      std::printf("  %-22s %-5s %-6s %-5s %s%s\n", s.config.mesh.c_str(), s.config.shard.c_str(),
                  s.config.checkpointing.c_str(), s.config.precision.c_str(),
                  show_compression ? (s.config.compression + " ").c_str() : "", s.reason.c_str());
  }
  std::printf(
      "(micro-batching: the trainer has no gradient accumulation, so each dp replica runs its "
      "whole "
      "share of the batch at once)\n");
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* c =
      app.add_subcommand("plan",
                         "Rank meshes, shard dimensions, checkpointing and precisions by simulated "
                         "iteration time, with memory fit");
  a->spec.add(*c, {"model", "input", "batch", "topology", "optimizer", "task", "classes", "dtype", "precision", "device",
                   "calibration", "bucket_mib", "overlap", "tf32", "grad_compression", "topk_ratio"},
              /*with_config=*/true);
  c->add_option("--devices", a->devices, "Use the first N devices (default: all of the topology)");
  c->add_option("--memory-cap", a->memory_cap,
                "Memory limit per device, e.g. 80GB (default: the device's)");
  c->add_option("--shards", a->shards, "Shard dimensions to try: W, H, HW")->capture_default_str();
  c->add_option("--checkpointing", a->checkpointing, "Policies to try: none, block, stage")
      ->capture_default_str();
  c->add_option("--precisions", a->precisions,
                "Precisions to try: fp32, bf16, fp16 (e.g. fp32,bf16; default: --precision's one)");
  c->add_option("--compressions", a->compressions,
                "Gradient compressions to compare: none, topk (at --topk-ratio), e.g. none,topk; prints "
                "whether top-k pays (default: --grad-compression's one)");
  c->add_option("--top", a->top, "Print only the N fastest rows (and the fastest that fits)");
  c->add_flag("--json", a->json, "Print one JSON object (configurations[], skipped[])");
  c->callback([&action, a] { action = [a] { return run_plan(*a); }; });
}

}  // namespace tessera::tools
