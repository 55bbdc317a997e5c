// The planner: candidate meshes × shard dimensions × checkpointing × precision × compression,
// enumerated and checked against core's layout here (once per mesh), then replayed, bounded and
// simulated or pruned by plan_search.cpp; ranked by iteration time with memory checked against
// the limit.
#include "tessera/sim/planner.hpp"

#include <algorithm>
#include <optional>

#include "plan_search.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/grad_compression.hpp"
#include "tessera/nn/precision.hpp"

namespace tessera::sim {

int PlanResult::best_fit() const {
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (entries[i].fits && entries[i].simulated) return static_cast<int>(i);
  return -1;
}

CompressionVerdict PlanResult::compression_verdict() const {
  CompressionVerdict v;
  auto same_run = [](const PlanConfig& a, const PlanConfig& b) {
    return a.mesh == b.mesh && a.shard == b.shard && a.checkpointing == b.checkpointing &&
           a.precision == b.precision;
  };
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const PlanEntry& e = entries[i];
    if (!e.simulated) continue;  // a bound, not a time
    const bool topk = e.config.compression == "topk";
    int& best = topk ? v.best_topk : v.best_dense;
    if (e.fits && best < 0) best = static_cast<int>(i);  // entries are fastest first
    if (!topk) continue;
    for (const PlanEntry& d : entries)
      if (d.simulated && d.config.compression == "none" && same_run(d.config, e.config) &&
          d.iteration_s > 0) {
        const double saving = (d.iteration_s - e.iteration_s) / d.iteration_s;
        v.best_saving = v.compared ? std::max(v.best_saving, saving) : saving;
        v.worst_saving = v.compared ? std::min(v.worst_saving, saving) : saving;
        ++v.compared;
        v.faster += e.iteration_s < d.iteration_s;
        break;
      }
  }
  return v;
}

std::vector<PlanConfig> enumerate_plan_configs(int devices, const std::vector<std::string>& shards,
                                               const std::vector<std::string>& checkpointing,
                                               const std::vector<std::string>& precisions,
                                               const std::vector<std::string>& compressions) {
  TESSERA_CHECK(devices >= 1, "plan: ", devices, " devices; give at least one");
  auto with_dp = [](int dp, const std::string& rest) {
    return dp == 1 ? rest : "dp=" + std::to_string(dp) + (rest.empty() ? "" : "," + rest);
  };
  std::vector<PlanConfig> meshes;
  for (int dp = 1; dp <= devices; ++dp) {
    if (devices % dp != 0) continue;
    const int s = devices / dp;
    if (s == 1) {
      meshes.push_back({with_dp(dp, dp == 1 ? "sp=1" : ""), dp, 1, 1, "-", ""});
      continue;
    }
    for (const std::string& shard : shards) {
      if (shard == "W")
        meshes.push_back({with_dp(dp, "sp=" + std::to_string(s)), dp, 1, s, "W", ""});
      if (shard == "H")
        meshes.push_back({with_dp(dp, "sp=" + std::to_string(s)), dp, s, 1, "H", ""});
      if (shard != "HW") continue;
      for (int h = 2; h <= s / 2; ++h)
        if (s % h == 0)
          meshes.push_back(
              {with_dp(dp, "sp_h=" + std::to_string(h) + ",sp_w=" + std::to_string(s / h)), dp, h,
               s / h, "HW", ""});
    }
  }
  std::vector<PlanConfig> out;
  for (const PlanConfig& m : meshes)
    for (const std::string& ck : checkpointing)
      for (const std::string& p : precisions)
        for (const std::string& g : compressions) {
          PlanConfig c = m;
          c.checkpointing = ck;
          c.precision = p;
          c.compression = g;
          out.push_back(std::move(c));
        }
  return out;
}

std::string describe(const PlanConfig& c) {
  return c.mesh + " " + c.shard + " " + c.checkpointing + " " + c.precision +
         (c.compression == "none" ? "" : ", " + c.compression);
}

nn::TrainOptions detail_plan::options_for(const nn::TrainOptions& base, const PlanConfig& c) {
  nn::TrainOptions t = base;
  t.shard = c.shard == "H" ? "H" : "W";  // "HW" tiles are named by the mesh dims sp_h, sp_w
  t.checkpointing = c.checkpointing;
  t.precision = *nn::parse_precision(c.precision);  // plan() checked the names
  t.grad_compression = *nn::parse_grad_compression(c.compression);
  return t;
}

namespace {

using detail_plan::options_for;

// The compressions to try, checked.
std::vector<std::string> checked_compressions(const PlanOptions& o) {
  TESSERA_CHECK(!o.compressions.empty(),
                "plan: no gradient compression to try; list none and/or topk");
  std::vector<std::string> out;
  for (const std::string& name : o.compressions) {
    const std::optional<nn::GradCompression> g = nn::parse_grad_compression(name);
    TESSERA_CHECK(g.has_value(), "plan: gradient compression '", name, "': list none and/or topk");
    TESSERA_CHECK(*g != nn::GradCompression::TopK || o.train.grad_reduce == nn::Precision::FP32,
                  "plan: topk sends f32 values, but the gradients are reduced in ",
                  nn::precision_name(o.train.grad_reduce),
                  "; plan topk with grad_reduce_dtype fp32");
    const std::string n(nn::grad_compression_name(*g));
    TESSERA_CHECK(std::find(out.begin(), out.end(), n) == out.end(), "plan: gradient compression ",
                  n, " listed twice; list each once");
    out.push_back(n);
  }
  return out;
}

// The precisions to try, checked and spelled as nn::precision_name spells them.
std::vector<std::string> checked_precisions(const PlanOptions& o) {
  TESSERA_CHECK(!o.precisions.empty(), "plan: no precision to try; list fp32, bf16 and/or fp16");
  std::vector<std::string> out;
  for (const std::string& name : o.precisions) {
    const std::optional<nn::Precision> p = nn::parse_precision(name);
    TESSERA_CHECK(p.has_value(), "plan: precision '", name, "': list fp32, bf16 and/or fp16");
    TESSERA_CHECK(*p == nn::Precision::FP32 || o.train.dtype == core::DType::F32,
                  "plan: precision ", name,
                  " (mixed precision) keeps f32 master weights, but the dtype is ",
                  core::dtype_name(o.train.dtype), "; plan it with dtype f32");
    const std::string n(nn::precision_name(*p));
    TESSERA_CHECK(std::find(out.begin(), out.end(), n) == out.end(), "plan: precision ", n,
                  " listed twice; list each once");
    out.push_back(n);
  }
  return out;
}

// Adds `c` to the search when core accepts its mesh and layout, else to `skips` (once per mesh:
// layout problems are the mesh's, whatever the checkpointing and precision). The mesh is checked
// once for the configurations that share it. Returns whether `c` was added.
bool add_candidate(const nn::TrainOptions& train, const PlanConfig& c, int index,
                   detail_plan::SearchInput& in, std::vector<detail_plan::IndexedSkip>& skips) {
  auto same_mesh = [&](const PlanConfig& x) { return x.mesh == c.mesh && x.shard == c.shard; };
  if (!skips.empty() && skips.back().skip.config.checkpointing == "*" &&
      same_mesh(skips.back().skip.config))
    return false;
  detail_plan::Candidate cand{c, {}, index};
  if (!in.candidates.empty() && same_mesh(in.candidates.back().config)) {
    cand.mesh = in.candidates.back().mesh;
    in.candidates.push_back(std::move(cand));
    return true;
  }
  const nn::TrainOptions t = options_for(train, c);
  try {
    cand.mesh = core::DeviceMesh::parse(c.mesh);
    nn::input_layout(cand.mesh, t.shard, t.batch, t.input, t.model.total_stride());
  } catch (const InvalidArgument& e) {
    PlanConfig any = c;
    any.checkpointing = "*";
    any.precision = "*";
    any.compression = "*";
    skips.push_back({index, {any, e.what()}});
    return false;
  }
  in.candidates.push_back(std::move(cand));
  return true;
}

}  // namespace

PlanResult plan(const PlanOptions& o, const Topology& topology, const DeviceCatalog& catalog) {
  const int available = static_cast<int>(topology.devices().size());
  PlanResult res;
  res.devices = o.devices > 0 ? o.devices : available;
  TESSERA_CHECK(res.devices <= available, "plan: ", res.devices, " devices asked but topology '",
                topology.name, "' has ", available, "; use a larger topology (e.g. dgx-a100:N)");
  TESSERA_CHECK(o.memory_cap_bytes >= 0, "plan: memory cap ", o.memory_cap_bytes,
                " bytes; give a positive size");
  const std::vector<std::string> precisions = checked_precisions(o);
  std::vector<std::string> compressions = checked_compressions(o);
  // The trainer refuses top-k on device buckets (it selects on the host). The replay runs on meta
  // tensors in host memory, so that refusal is the planner's to make, once for every candidate.
  if (const auto topk = std::find(compressions.begin(), compressions.end(), "topk");
      topk != compressions.end()) {
    const std::vector<int> ranks = topology.devices();
    for (int i = 0; i < res.devices; ++i) {
      const std::string& dev =
          topology.nodes()[static_cast<std::size_t>(ranks[static_cast<std::size_t>(i)])].device;
      if (catalog.get(dev).kind != "gpu") continue;
      res.skipped.push_back(
          {{"*", 1, 1, 1, "*", "*", "*", "topk"},
           "top-k gradient compression selects on the host, and on " + dev +
               " (a GPU) the trainer keeps the gradients in device memory and refuses it"});
      compressions.erase(topk);
      break;
    }
    TESSERA_CHECK(!compressions.empty(), "plan: ", res.skipped.back().reason,
                  "; plan with --compressions none");
  }
  detail_plan::SearchInput in{o, topology, catalog, {}, 0, 0};
  std::vector<detail_plan::IndexedSkip> skips;
  for (auto& k : res.skipped) skips.push_back({-1, std::move(k)});
  res.skipped.clear();
  const std::vector<PlanConfig> configs =
      enumerate_plan_configs(res.devices, o.shards, o.checkpointing, precisions, compressions);
  in.total = static_cast<int>(configs.size());
  for (std::size_t i = 0; i < configs.size(); ++i)
    if (!add_candidate(o.train, configs[i], static_cast<int>(i), in, skips)) ++in.skipped;
  detail_plan::search(in, res, skips);
  std::stable_sort(skips.begin(), skips.end(),
                   [](const auto& a, const auto& b) { return a.index < b.index; });
  for (auto& k : skips) res.skipped.push_back(std::move(k.skip));
  return res;
}

}  // namespace tessera::sim
