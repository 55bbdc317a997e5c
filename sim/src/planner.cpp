// The planner: candidate meshes (dp × pp × spatial) × shard dimensions × micro-batches ×
// checkpointing × precision × compression, enumerated and checked against core's layout here
// (once per mesh and micro-batch count), pipelined ones cut by the simulator's stage balance,
// then replayed, bounded and simulated or pruned by plan_search.cpp; ranked by iteration time
// with memory checked against the limit.
#include "tessera/sim/planner.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include "plan_search.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/grad_compression.hpp"
#include "tessera/nn/precision.hpp"
#include "tessera/sim/stage_cut.hpp"

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
           a.precision == b.precision && a.micro_batches == b.micro_batches;
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

namespace {

// "dp=2,pp=2,sp=4": the named factors above 1 joined, "sp=1" when there are none.
std::string mesh_name(int dp, int pp, const std::string& spatial) {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ",") + part; };
  if (dp > 1) add("dp=" + std::to_string(dp));
  if (pp > 1) add("pp=" + std::to_string(pp));
  if (!spatial.empty()) add(spatial);
  return out.empty() ? "sp=1" : out;
}

PlanConfig mesh_config(std::string mesh, int dp, int pp, int sp_h, int sp_w, std::string shard) {
  PlanConfig c;
  c.mesh = std::move(mesh);
  c.dp = dp;
  c.pp = pp;
  c.sp_h = sp_h;
  c.sp_w = sp_w;
  c.shard = std::move(shard);
  return c;
}

// The meshes of `s` spatial ranks (with dp and pp given), one per shard form.
void add_spatial_meshes(int dp, int pp, int s, const std::vector<std::string>& shards,
                        std::vector<PlanConfig>& meshes) {
  if (s == 1) {
    meshes.push_back(mesh_config(mesh_name(dp, pp, ""), dp, pp, 1, 1, "-"));
    return;
  }
  const std::string sp = "sp=" + std::to_string(s);
  for (const std::string& shard : shards) {
    if (shard == "W") meshes.push_back(mesh_config(mesh_name(dp, pp, sp), dp, pp, 1, s, "W"));
    if (shard == "H") meshes.push_back(mesh_config(mesh_name(dp, pp, sp), dp, pp, s, 1, "H"));
    if (shard != "HW") continue;
    for (int h = 2; h <= s / 2; ++h) {
      if (s % h != 0) continue;
      const std::string tiles = "sp_h=" + std::to_string(h) + ",sp_w=" + std::to_string(s / h);
      meshes.push_back(mesh_config(mesh_name(dp, pp, tiles), dp, pp, h, s / h, "HW"));
    }
  }
}

}  // namespace

std::vector<PlanConfig> enumerate_plan_configs(int devices, const PlanAxes& axes) {
  TESSERA_CHECK(devices >= 1, "plan: ", devices, " devices; give at least one");
  for (int pp : axes.pipeline_stages)
    TESSERA_CHECK(pp >= 1, "plan: ", pp, " pipeline stages; list counts of at least 1");
  for (int m : axes.micro_batches)
    TESSERA_CHECK(m >= 1, "plan: ", m, " micro-batches; list counts of at least 1");
  std::vector<PlanConfig> meshes;
  for (int dp = 1; dp <= devices; ++dp) {
    if (devices % dp != 0) continue;
    for (int pp : axes.pipeline_stages)
      if ((devices / dp) % pp == 0)
        add_spatial_meshes(dp, pp, devices / dp / pp, axes.shards, meshes);
  }
  std::vector<PlanConfig> out;
  for (const PlanConfig& m : meshes)
    for (int micro : axes.micro_batches)
      for (const std::string& ck : axes.checkpointing)
        for (const std::string& p : axes.precisions)
          for (const std::string& g : axes.compressions) {
            PlanConfig c = m;
            c.micro_batches = micro;
            c.checkpointing = ck;
            c.precision = p;
            c.compression = g;
            out.push_back(std::move(c));
          }
  return out;
}

std::vector<PlanConfig> enumerate_plan_configs(int devices, const std::vector<std::string>& shards,
                                               const std::vector<std::string>& checkpointing,
                                               const std::vector<std::string>& precisions,
                                               const std::vector<std::string>& compressions) {
  return enumerate_plan_configs(devices, PlanAxes{shards, checkpointing, precisions, compressions});
}

std::string describe(const PlanConfig& c) {
  return c.mesh + " " + c.shard + " " + c.checkpointing + " " + c.precision +
         (c.micro_batches > 1 ? " M=" + std::to_string(c.micro_batches) : "") +
         (c.compression == "none" ? "" : ", " + c.compression);
}

nn::TrainOptions detail_plan::options_for(const nn::TrainOptions& base, const PlanConfig& c) {
  nn::TrainOptions t = base;
  t.shard = c.shard == "H" ? "H" : "W";  // "HW" tiles are named by the mesh dims sp_h, sp_w
  t.checkpointing = c.checkpointing;
  t.precision = *nn::parse_precision(c.precision);  // plan() checked the names
  t.grad_compression = *nn::parse_grad_compression(c.compression);
  t.micro_batches = c.micro_batches;
  t.stage_starts = c.stage_starts;
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

// Whether core accepts `c`'s mesh and layout, for the batch cut into its micro-batches; throws
// InvalidArgument with core's reason when not.
core::DeviceMesh checked_mesh(const nn::TrainOptions& train, const PlanConfig& c) {
  const nn::TrainOptions t = options_for(train, c);
  core::DeviceMesh mesh = core::DeviceMesh::parse(c.mesh);
  TESSERA_CHECK(t.batch % c.micro_batches == 0, "batch ", t.batch, " does not split into ",
                c.micro_batches, " micro-batches; list micro-batch counts that divide it");
  if (c.micro_batches == 1) {
    nn::input_layout(mesh, t.shard, t.batch, t.input, t.model.total_stride());
    return mesh;
  }
  try {
    nn::input_layout(mesh, t.shard, t.batch / c.micro_batches, t.input, t.model.total_stride());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::cat("in ", c.micro_batches, " micro-batches of ",
                                      t.batch / c.micro_batches, " samples: ", e.what()));
  }
  return mesh;
}

// The stage cuts of pp > 1 candidates, one replay per run without its pipeline (the cut depends
// on the mesh without pp, micro-batches, checkpointing, precision and compression).
class StageCuts {
 public:
  explicit StageCuts(const detail_plan::SearchInput& in) : in_(in) {}
  // `c`'s cut, on rank 0's device; throws what sim::balanced_stage_starts throws.
  std::vector<int> get(const PlanConfig& c, const core::DeviceMesh& mesh) {
    const std::string key = mesh_without_pp(mesh).to_string() + " " + describe(c);
    if (auto it = cuts_.find(key); it != cuts_.end()) return it->second;
    const EngineOptions& eo = in_.options.engine;
    const std::string device =
        eo.device.empty()
            ? in_.topology.nodes()[static_cast<std::size_t>(in_.topology.devices()[0])].device
            : eo.device;
    std::vector<int> cut =
        balanced_stage_starts(options_for(in_.options.train, c), mesh, in_.catalog.get(device), eo);
    return cuts_.emplace(key, std::move(cut)).first->second;
  }

 private:
  const detail_plan::SearchInput& in_;
  std::map<std::string, std::vector<int>> cuts_;
};

// Adds `c` to the search when core accepts its mesh and layout, else to `skips` (once per mesh:
// layout problems are the mesh's, whatever the checkpointing and precision). The mesh is checked
// once for the configurations that share it; a pp > 1 candidate gets its balanced stage cut, or
// is skipped with the reason it has none (fewer units than stages). Returns whether `c` was added.
bool add_candidate(const nn::TrainOptions& train, PlanConfig c, int index, StageCuts& cuts,
                   detail_plan::SearchInput& in, std::vector<detail_plan::IndexedSkip>& skips) {
  auto same_mesh = [&](const PlanConfig& x) {
    return x.mesh == c.mesh && x.shard == c.shard && x.micro_batches == c.micro_batches;
  };
  if (!skips.empty() && skips.back().skip.config.checkpointing == "*" &&
      same_mesh(skips.back().skip.config))
    return false;
  detail_plan::Candidate cand{c, {}, index};
  try {
    if (!in.candidates.empty() && same_mesh(in.candidates.back().config))
      cand.mesh = in.candidates.back().mesh;
    else
      cand.mesh = checked_mesh(train, c);
  } catch (const InvalidArgument& e) {
    PlanConfig any = c;
    any.checkpointing = "*";
    any.precision = "*";
    any.compression = "*";
    skips.push_back({index, {any, e.what()}});
    return false;
  }
  if (c.pp > 1) {
    try {
      cand.config.stage_starts = cuts.get(c, cand.mesh);
    } catch (const InvalidArgument& e) {
      skips.push_back({index, {c, e.what()}});
      return false;
    }
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
          {[] {
             PlanConfig any = mesh_config("*", 1, 1, 1, 1, "*");
             any.checkpointing = any.precision = "*";
             any.compression = "topk";
             return any;
           }(),
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
  const std::vector<PlanConfig> configs = enumerate_plan_configs(
      res.devices, PlanAxes{o.shards, o.checkpointing, precisions, compressions, o.pipeline_stages,
                            o.micro_batches});
  in.total = static_cast<int>(configs.size());
  StageCuts cuts(in);
  for (std::size_t i = 0; i < configs.size(); ++i)
    if (!add_candidate(o.train, configs[i], static_cast<int>(i), cuts, in, skips)) ++in.skipped;
  detail_plan::search(in, res, skips);
  std::stable_sort(skips.begin(), skips.end(),
                   [](const auto& a, const auto& b) { return a.index < b.index; });
  for (auto& k : skips) res.skipped.push_back(std::move(k.skip));
  return res;
}

}  // namespace tessera::sim
