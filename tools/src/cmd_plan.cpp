// `tessera plan`: ranks the ways to train a model on a cluster — dp × spatial meshes, shard
// dimension, checkpointing, precision, gradient compression — by simulated iteration time, with
// each one's replayed peak memory against the device capacity or --memory-cap (run::plan does the
// work and writes the JSON record and the table).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include "commands.hpp"
#include "spec_options.hpp"
#include "tessera/run/plan.hpp"

namespace tessera::tools {

namespace {

run::RunSpec plan_defaults() {
  run::RunSpec s = run::RunSpec::for_simulation();
  s.model = "convnext-xl";
  s.input = "3x512x4096";
  s.batch = 7;
  s.topology = "dgx-a100:2";  // the mesh: run::plan chooses it
  return s;
}

struct PlanArgs {
  SpecOptions spec{plan_defaults()};
  std::string memory_cap;
  std::string shards = "W,H,HW";
  std::string checkpointing = "none,block,stage";
  std::string precisions;    ///< empty: the run description's precision (--precision, fp32)
  std::string compressions;  ///< empty: the run description's one (--grad-compression, none)
  std::vector<int> pp_list;  ///< empty: no pipeline stages
  std::vector<int> micro_batches_list;  ///< empty: --micro-batches's one
  int devices = 0;
  int top = 0;
  int threads = 0;
  bool json = false;
  bool exhaustive = false;
};

/// "\r[ 37/120] simulated 5, pruned 30, best 1.234 s dp=16,sp=4 W none fp32" on stderr, padded
/// over the previous line; a newline after the last.
void show_progress(const sim::PlanProgress& p) {
  char line[256];
  const int n = std::snprintf(line, sizeof line, "[%3d/%d] simulated %d, pruned %d", p.done,
                              p.total, p.simulated, p.pruned);
  std::string s(line, static_cast<std::size_t>(std::max(n, 0)));
  if (!p.best.empty()) {
    std::snprintf(line, sizeof line, ", best %.3f s %s", p.best_s, p.best.c_str());
    s += line;
  }
  std::fprintf(stderr, "\r%-100s%s", s.c_str(), p.done == p.total ? "\n" : "");
  std::fflush(stderr);
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

int run_plan(const PlanArgs& a) {
  run::PlanChoices c;
  c.devices = a.devices;
  c.memory_cap = a.memory_cap;
  c.shards = split_list(a.shards);
  c.checkpointing = split_list(a.checkpointing);
  c.precisions = split_list(a.precisions);      // empty: --precision's one
  c.compressions = split_list(a.compressions);  // empty: --grad-compression's one
  c.pipeline_stages = a.pp_list;
  c.micro_batches = a.micro_batches_list;
  c.exhaustive = a.exhaustive;
  c.threads = a.threads;
  if (isatty(fileno(stderr))) c.progress = show_progress;  // a log file gets no \r lines
  const run::PlanRun p = run::plan(a.spec.spec(), c);
  std::fputs((a.json ? p.to_json() + "\n" : p.to_table(a.top)).c_str(), stdout);
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* c =
      app.add_subcommand("plan",
                         "Rank meshes, shard dimensions, checkpointing and precisions by simulated "
                         "iteration time, with memory fit");
  a->spec.add(*c,
              {"model", "input", "batch", "topology", "optimizer", "task", "classes", "dtype",
               "precision", "device", "calibration", "bucket_mib", "overlap", "tf32",
               "grad_compression", "topk_ratio", "micro_batches", "schedule"},
              /*with_config=*/true);
  c->add_option("--devices", a->devices, "Use the first N devices (default: all of the topology)");
  c->add_option("--memory-cap", a->memory_cap,
                "Memory limit per device, e.g. 80GB (default: the device's)");
  c->add_option("--shards", a->shards, "Shard dimensions to try: W, H, HW")->capture_default_str();
  c->add_option("--checkpointing", a->checkpointing, "Policies to try: none, block, stage")
      ->capture_default_str();
  c->add_option("--precisions", a->precisions,
                "Precisions to try: fp32, bf16, fp16 (e.g. fp32,bf16; default: --precision's one)");
  c->add_option(
      "--compressions", a->compressions,
      "Gradient compressions to compare: none, topk (at --topk-ratio), e.g. none,topk; prints "
      "whether top-k pays (default: --grad-compression's one)");
  c->add_option("--pp-list", a->pp_list,
                "Pipeline stage counts to try (mesh dim pp, cut by the simulator's balance), "
                "e.g. 1,2,4 (default: 1)")
      ->delimiter(',');
  c->add_option("--micro-batches-list", a->micro_batches_list,
                "Micro-batch counts to try, e.g. 1,2,4 (default: --micro-batches's one)")
      ->delimiter(',');
  c->add_option("--top", a->top, "Print only the N fastest rows (and the fastest that fits)");
  c->add_flag("--exhaustive", a->exhaustive,
              "Simulate every candidate (default: skip those whose lower bound is above the best "
              "time found, or that do not fit; the best plan is the same)");
  c->add_option("--threads", a->threads, "Candidates evaluated at once (default 0: every core)");
  c->add_flag("--json", a->json, "Print one JSON object (configurations[], skipped[])");
  c->callback([&action, a] { action = [a] { return run_plan(*a); }; });
}

}  // namespace tessera::tools
