// plan(): a RunSpec and PlanChoices assembled into sim::plan's inputs once, for the CLI, Python and
// the studio; PlanRun::to_json, the plan record of docs/records.md.
#include "tessera/run/plan.hpp"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"
#include "tessera/nn/precision.hpp"
#include "tessera/run/resolve.hpp"
#include "tessera/sim/units.hpp"

namespace tessera::run {

namespace {

using Json = nlohmann::ordered_json;

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& x : v) out += (out.empty() ? "" : ",") + x;
  return out;
}

/// `listed` if given, else {`own`}; a list beside a non-default `own` is ambiguous (which one?).
std::vector<std::string> one_or_list(const char* field, const char* list_field,
                                     const std::string& own, bool own_is_default,
                                     const std::vector<std::string>& listed) {
  TESSERA_CHECK(listed.empty() || own_is_default, "plan: ", field, " '", own, "' and ", list_field,
                " '", joined(listed), "': give one (", list_field, " '", own, "' alone plans with ",
                own, ")");
  return listed.empty() ? std::vector<std::string>{own} : listed;
}

sim::PlanOptions plan_options(const RunSpec& spec, const SimSetup& setup, const PlanChoices& c) {
  sim::PlanOptions o;
  o.train = setup.train;
  o.engine = setup.engine;
  o.devices = c.devices;
  o.exhaustive = c.exhaustive;
  o.threads = c.threads;
  o.progress = c.progress;
  o.cancel = c.cancel;
  for (const std::string& s : c.shards)
    TESSERA_CHECK(s == "W" || s == "H" || s == "HW", "plan: shards '", joined(c.shards),
                  "': list W, H and/or HW");
  o.shards = c.shards;
  o.checkpointing = c.checkpointing;
  // sim::plan checks the precision and compression names.
  o.precisions =
      one_or_list("precision", "precisions", spec.precision,
                  nn::parse_precision(spec.precision) == nn::Precision::FP32, c.precisions);
  o.compressions = one_or_list("grad_compression", "compressions", spec.grad_compression,
                               spec.grad_compression == "none", c.compressions);
  if (!c.pipeline_stages.empty()) o.pipeline_stages = c.pipeline_stages;
  TESSERA_CHECK(c.micro_batches.empty() || spec.micro_batches == 1, "plan: micro_batches ",
                spec.micro_batches, " and a list of micro-batch counts: give one (the list ",
                spec.micro_batches, " alone plans with ", spec.micro_batches, ")");
  o.micro_batches =
      c.micro_batches.empty() ? std::vector<int>{spec.micro_batches} : c.micro_batches;
  if (!c.memory_cap.empty()) {
    o.memory_cap_bytes = static_cast<double>(sim::parse_byte_size(c.memory_cap));
    TESSERA_CHECK(o.memory_cap_bytes > 0, "plan: memory_cap '", c.memory_cap,
                  "': give a positive size such as 80GB");
  }
  return o;
}

Json config_json(const sim::PlanConfig& c) {
  return {{"mesh", c.mesh},
          {"shard", c.shard},
          {"checkpointing", c.checkpointing},
          {"precision", c.precision},
          {"compression", c.compression},
          {"pp", c.pp},
          {"micro_batches", c.micro_batches},
          {"stage_starts", c.stage_starts}};
}

/// Byte figures the planner keeps as doubles are whole numbers of bytes: written as integers.
std::int64_t whole_bytes(double bytes) { return std::llround(bytes); }

Json entry_json(const sim::PlanEntry& e) {
  Json x = config_json(e.config);
  x["iteration_time_s"] = e.iteration_s;
  x["images_per_s"] = e.images_per_s;
  x["peak_memory_bytes"] = e.peak_bytes;
  x["activation_peak_bytes"] = e.activation_peak_bytes;
  x["limit_bytes"] = whole_bytes(e.limit_bytes);
  x["fits"] = e.fits;
  x["compute_busy_s"] = e.compute_busy_s;
  x["comm_busy_s"] = e.comm_busy_s;
  x["replayed_ranks"] = e.classes;
  x["simulated"] = e.simulated;
  x["lower_bound_s"] = e.lower_bound_s;
  x["memory_exact"] = e.memory_exact;
  return x;
}

}  // namespace

PlanRun plan(const RunSpec& spec, const PlanChoices& choices) {
  RunSpec s = spec;
  s.mesh = "sp=1";  // the planner chooses the mesh; this only validates the model and input
  const SimSetup setup = resolve_sim(s);
  PlanRun run;
  run.options = plan_options(s, setup, choices);
  run.input = s.input;
  run.topology = setup.topology.name;
  const auto t0 = std::chrono::steady_clock::now();
  run.result = sim::plan(run.options, setup.topology, setup.catalog);
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

std::string PlanRun::to_json() const {
  Json o;
  o["model"] = options.train.model.name;
  o["input"] = input;
  o["batch"] = options.train.batch;
  o["topology"] = topology;
  o["devices"] = result.devices;
  o["memory_cap_bytes"] = whole_bytes(options.memory_cap_bytes);
  o["best_fit"] = result.best_fit();
  o["exhaustive"] = options.exhaustive;
  o["simulated"] = result.progress.simulated;
  o["pruned"] = result.progress.pruned;
  o["cancelled"] = result.cancelled;
  Json entries = Json::array(), skipped = Json::array();
  for (const sim::PlanEntry& e : result.entries) entries.push_back(entry_json(e));
  for (const sim::PlanSkip& k : result.skipped) {
    Json x = config_json(k.config);
    x["reason"] = k.reason;
    skipped.push_back(x);
  }
  o["configurations"] = entries;
  o["skipped"] = skipped;
  if (const sim::CompressionVerdict v = result.compression_verdict(); v.compared > 0)
    o["compression_verdict"] = {{"topk_ratio", options.train.topk_ratio},
                                {"compared", v.compared},
                                {"topk_faster", v.faster},
                                {"best_saving", v.best_saving},
                                {"worst_saving", v.worst_saving},
                                {"best_dense", v.best_dense},
                                {"best_topk", v.best_topk}};
  return o.dump(1);
}

}  // namespace tessera::run
