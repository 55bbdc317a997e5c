// The planner on a small ConvNeXt over 4 GPUs: the candidates it enumerates, a table sorted by
// iteration time, memory fit flags that agree with replaying each configuration directly (under
// the device capacity and under a cap that splits the table), and configurations the batch or the
// input cannot support skipped with core's reason; precision as a dimension (bf16 rows of
// ConvNeXt-T on a DGX-A100 with half the activations and a shorter iteration than their fp32
// twins).
#include <algorithm>
#include <cstdio>

#include "plan_search.hpp"
#include "sim_test_util.hpp"
#include "support/catch.hpp"
#include "tessera/nn/models.hpp"
#include "tessera/sim/planner.hpp"
#include "tessera/sim/stage_cut.hpp"

using namespace tessera;

namespace {

sim::PlanOptions small_plan() {
  sim::PlanOptions o;
  o.train = simtest::small_run("convnext");
  o.exhaustive = true;  // these tests read every configuration's simulated figures
  return o;
}

std::size_t replayed_peak(const sim::PlanOptions& o, const sim::PlanConfig& c) {
  nn::TrainOptions t = o.train;
  t.shard = c.shard == "H" ? "H" : "W";
  t.checkpointing = c.checkpointing;
  std::size_t peak = 0;
  for (const sim::RankReplay& r : sim::replay_all(t, core::DeviceMesh::parse(c.mesh)))
    peak = std::max(peak, r.memory.peak_total);
  return peak;
}

bool has_skip(const sim::PlanResult& r, const std::string& mesh, const std::string& shard,
              const std::string& needle) {
  for (const sim::PlanSkip& s : r.skipped)
    if (s.config.mesh == mesh && s.config.shard == shard &&
        s.reason.find(needle) != std::string::npos)
      return true;
  return false;
}

}  // namespace

TEST_CASE("the planner enumerates dp x spatial meshes, shard dimensions and checkpointing",
          "[sim][planner]") {
  const auto configs = sim::enumerate_plan_configs(4, {"W", "H", "HW"}, {"none", "block", "stage"});
  std::vector<std::string> meshes;
  for (const sim::PlanConfig& c : configs) {
    const std::string key = c.mesh + " " + c.shard;
    if (std::find(meshes.begin(), meshes.end(), key) == meshes.end()) meshes.push_back(key);
  }
  const std::vector<std::string> expected = {"sp=4 W",      "sp=4 H",      "sp_h=2,sp_w=2 HW",
                                             "dp=2,sp=2 W", "dp=2,sp=2 H", "dp=4 -"};
  REQUIRE(meshes == expected);
  REQUIRE(configs.size() == 3 * expected.size());
  REQUIRE(sim::enumerate_plan_configs(1, {"W"}, {"none"}).at(0).mesh == "sp=1");
  REQUIRE(simtest::lacks(simtest::error_of([] { sim::enumerate_plan_configs(0, {"W"}, {"none"}); }),
                         {"0 devices"}) == "");
}

TEST_CASE("the plan is sorted by iteration time and flags OOM as the replays do",
          "[sim][planner]") {
  const sim::Topology topo = simtest::star(4, 100e9, 2'000'000);
  const sim::DeviceCatalog cat;
  sim::PlanOptions o = small_plan();
  const sim::PlanResult r = sim::plan(o, topo, cat);
  REQUIRE(r.devices == 4);
  // 6 meshes x 3 policies; dp=4 (batch 2) and sp=4 along H (2 blocks of height) are refused once
  // each.
  REQUIRE(r.entries.size() == 4 * 3);
  REQUIRE(r.skipped.size() == 2);
  REQUIRE(has_skip(r, "dp=4", "-", "batch 2 over dp=4"));
  REQUIRE(has_skip(r, "sp=4", "H", "height"));
  for (std::size_t i = 1; i < r.entries.size(); ++i)
    REQUIRE(r.entries[i - 1].iteration_s <= r.entries[i].iteration_s);
  std::vector<std::size_t> peaks;
  for (const sim::PlanEntry& e : r.entries) {
    INFO(e.config.mesh << " " << e.config.shard << " " << e.config.checkpointing);
    REQUIRE(e.iteration_s > 0);
    REQUIRE(e.peak_bytes == replayed_peak(o, e.config));
    REQUIRE(e.limit_bytes == cat.get("a100-80gb").capacity_bytes);
    REQUIRE(e.fits);
    peaks.push_back(e.peak_bytes);
    std::printf("plan: %-16s %-3s %-6s %9.1f us %8zu bytes\n", e.config.mesh.c_str(),
                e.config.shard.c_str(), e.config.checkpointing.c_str(), e.iteration_s * 1e6,
                e.peak_bytes);
  }
  REQUIRE(r.best_fit() == 0);

  // A cap between the smallest and the largest peak: the flags follow the replayed peaks.
  std::sort(peaks.begin(), peaks.end());
  REQUIRE(peaks.front() < peaks.back());
  o.memory_cap_bytes = static_cast<double>(peaks[peaks.size() / 2]);
  const sim::PlanResult capped = sim::plan(o, topo, cat);
  int fit = 0, oom = 0;
  for (const sim::PlanEntry& e : capped.entries) {
    REQUIRE(e.limit_bytes == o.memory_cap_bytes);
    REQUIRE(e.fits == (static_cast<double>(e.peak_bytes) <= o.memory_cap_bytes));
    (e.fits ? fit : oom)++;
  }
  REQUIRE(fit > 0);
  REQUIRE(oom > 0);
  const int best = capped.best_fit();
  REQUIRE(best >= 0);
  for (int i = 0; i < best; ++i) REQUIRE_FALSE(capped.entries[i].fits);
}

TEST_CASE("the planner refuses more devices than the topology has", "[sim][planner]") {
  const sim::Topology topo = simtest::star(2, 100e9, 2'000'000);
  sim::PlanOptions o = small_plan();
  o.devices = 4;
  REQUIRE(simtest::lacks(simtest::error_of([&] { sim::plan(o, topo, sim::DeviceCatalog{}); }),
                         {"4 devices", "star2", "has 2"}) == "");
}

TEST_CASE("precision is a planner dimension: bf16 halves activations and runs at the 16-bit peak",
          "[sim][planner]") {
  const sim::Topology topo = sim::Topology::preset("dgx-a100");
  const sim::DeviceCatalog cat;
  // ConvNeXt-T at 3x256x1024: big enough for the convolutions, not kernel launches, to set the
  // time.
  sim::PlanOptions o = small_plan();
  o.train.model = nn::model_preset("convnext-t");
  o.train.input = {3, 256, 1024};
  o.devices = 4;
  o.shards = {"W"};
  o.checkpointing = {"none", "block"};
  const sim::PlanResult fp32 = sim::plan(o, topo, cat);  // the default: fp32 only
  REQUIRE_FALSE(fp32.entries.empty());
  for (const sim::PlanEntry& e : fp32.entries) REQUIRE(e.config.precision == "fp32");
  o.precisions = {"fp32", "bf16"};
  const sim::PlanResult both = sim::plan(o, topo, cat);
  REQUIRE(both.entries.size() == 2 * fp32.entries.size());
  REQUIRE(both.skipped.size() == fp32.skipped.size());
  for (const sim::PlanSkip& s : both.skipped) REQUIRE(s.config.precision == "*");
  auto find = [&](const sim::PlanConfig& c, const std::string& precision) {
    for (const sim::PlanEntry& e : both.entries)
      if (e.config.mesh == c.mesh && e.config.shard == c.shard &&
          e.config.checkpointing == c.checkpointing && e.config.precision == precision)
        return e;
    FAIL("no " << precision << " entry for " << c.mesh << " " << c.checkpointing);
    return sim::PlanEntry{};
  };
  for (const sim::PlanEntry& f : fp32.entries) {
    INFO(f.config.mesh << " " << f.config.shard << " " << f.config.checkpointing);
    // The fp32 rows of a two-precision plan are the fp32-only plan's, figure for figure.
    const sim::PlanEntry same = find(f.config, "fp32");
    REQUIRE(same.peak_bytes == f.peak_bytes);
    REQUIRE(same.activation_peak_bytes == f.activation_peak_bytes);
    REQUIRE(same.iteration_s == f.iteration_s);
    const sim::PlanEntry b = find(f.config, "bf16");
    std::printf("plan precision: %-10s %-6s fp32 %9.1f us %8zu act bytes | bf16 %9.1f us %8zu\n",
                f.config.mesh.c_str(), f.config.checkpointing.c_str(), f.iteration_s * 1e6,
                f.activation_peak_bytes, b.iteration_s * 1e6, b.activation_peak_bytes);
    // 16-bit activations and saved tensors: about half the bytes (the input images, labels and
    // f32 statistics stay), convolutions at the A100's bf16 tensor-core peak.
    REQUIRE(b.activation_peak_bytes < f.activation_peak_bytes);
    REQUIRE(static_cast<double>(b.activation_peak_bytes) <= 0.6 * f.activation_peak_bytes);
    REQUIRE(b.peak_bytes < f.peak_bytes);
    REQUIRE(b.iteration_s < f.iteration_s);
  }
}

TEST_CASE("the planner refuses unknown, repeated and f64 mixed precisions", "[sim][planner]") {
  const sim::Topology topo = simtest::star(2, 100e9, 2'000'000);
  sim::PlanOptions o = small_plan();
  o.precisions = {"fp32", "fp64"};
  REQUIRE(simtest::lacks(simtest::error_of([&] { sim::plan(o, topo, sim::DeviceCatalog{}); }),
                         {"precision 'fp64'", "fp32, bf16 and/or fp16"}) == "");
  o.precisions = {"bf16", "bf16"};
  REQUIRE(simtest::lacks(simtest::error_of([&] { sim::plan(o, topo, sim::DeviceCatalog{}); }),
                         {"bf16", "twice"}) == "");
  o.precisions = {};
  REQUIRE(simtest::lacks(simtest::error_of([&] { sim::plan(o, topo, sim::DeviceCatalog{}); }),
                         {"no precision"}) == "");
  o.precisions = {"fp16"};
  o.train.dtype = core::DType::F64;
  REQUIRE(simtest::lacks(simtest::error_of([&] { sim::plan(o, topo, sim::DeviceCatalog{}); }),
                         {"fp16", "f64", "dtype f32"}) == "");
}

namespace {

/// 4 ranks of cpu-host on one switch, every route at `bw` per direction (a cluster of CPUs
/// behind one network).
sim::Topology cpu_star(double bw) {
  sim::Topology t;
  t.name = "cpu-star";
  const int sw = t.add_node({"switch", sim::NodeKind::PcieSwitch, "", 0});
  for (int i = 0; i < 4; ++i) {
    const int c = t.add_node({"cpu" + std::to_string(i), sim::NodeKind::Cpu, "cpu-host", i});
    t.add_link(c, sw, bw, 5'000'000, "ib");
  }
  return t;
}

const sim::PlanEntry& twin(const sim::PlanResult& r, const sim::PlanConfig& c, const std::string& compression) {
  for (const sim::PlanEntry& e : r.entries)
    if (e.config.mesh == c.mesh && e.config.shard == c.shard && e.config.checkpointing == c.checkpointing &&
        e.config.precision == c.precision && e.config.compression == compression)
      return e;
  FAIL("no " << compression << " entry for " << c.mesh);
  return r.entries.front();
}

}  // namespace

TEST_CASE("gradient compression is a planner dimension: top-k's kernels cost compute, its bytes are fewer, "
          "it pays on a slow network and not on shared memory, and GPUs refuse it",
          "[sim][planner][topk]") {
  const sim::DeviceCatalog cat;
  sim::PlanOptions o = small_plan();
  o.devices = 4;
  o.shards = {"W"};
  o.checkpointing = {"none"};
  o.compressions = {"none", "topk"};
  for (const double bw : {13e9, 10e6}) {  // shared memory; a 10 MB/s network
    INFO("link " << bw << " B/s");
    const sim::PlanResult r = sim::plan(o, bw > 1e9 ? sim::Topology::preset("cpu-host:4") : cpu_star(bw), cat);
    REQUIRE(r.entries.size() % 2 == 0);
    REQUIRE_FALSE(r.entries.empty());
    int faster = 0;
    for (const sim::PlanEntry& d : r.entries) {
      if (d.config.compression != "none") continue;
      const sim::PlanEntry& t = twin(r, d.config, "topk");
      INFO(d.config.mesh);
      std::printf("plan compression: link %8.3g B/s %-10s dense %9.1f us (compute %9.1f, comm %9.1f) | topk %9.1f us "
                  "(compute %9.1f, comm %9.1f)\n",
                  bw, d.config.mesh.c_str(), d.iteration_s * 1e6, d.compute_busy_s * 1e6, d.comm_busy_s * 1e6,
                  t.iteration_s * 1e6, t.compute_busy_s * 1e6, t.comm_busy_s * 1e6);
      // Every 4-rank mesh reduces the weights' gradients over a group of 2 or 4: top-k's selection,
      // scatter-add and residual are kernels the dense run does not have, and its all_gather of 1%
      // of the entries as (index, value) pairs moves fewer bytes than the all-reduce.
      REQUIRE(t.compute_busy_s > d.compute_busy_s);
      REQUIRE(t.comm_busy_s < d.comm_busy_s);
      REQUIRE(t.peak_bytes > d.peak_bytes);  // the residuals, one per parameter
      faster += t.iteration_s < d.iteration_s;
    }
    const sim::CompressionVerdict v = r.compression_verdict();
    REQUIRE(v.compared == static_cast<int>(r.entries.size() / 2));
    REQUIRE(v.faster == faster);
    REQUIRE(v.best_dense >= 0);
    REQUIRE(v.best_topk >= 0);
    REQUIRE(r.entries[std::size_t(v.best_dense)].config.compression == "none");
    REQUIRE(r.entries[std::size_t(v.best_topk)].config.compression == "topk");
    if (bw > 1e9) {
      // Shared memory: the bytes saved are worth less than the kernels cost.
      REQUIRE(v.faster == 0);
      REQUIRE(v.best_saving < 0);
    } else {
      // A 10 MB/s network: the dense all-reduce of every gradient dominates, top-k wins everywhere.
      REQUIRE(v.faster == v.compared);
      REQUIRE(v.worst_saving > 0);
      REQUIRE(r.entries[0].config.compression == "topk");
    }
  }
  // A dense-only plan has no verdict.
  o.compressions = {"none"};
  REQUIRE(sim::plan(o, sim::Topology::preset("cpu-host:4"), cat).compression_verdict().compared == 0);

  // GPUs keep gradients in device memory, where the trainer refuses top-k: one skip, the dense rows.
  o.compressions = {"none", "topk"};
  const sim::PlanResult g = sim::plan(o, simtest::star(4, 100e9, 2'000'000), cat);
  REQUIRE_FALSE(g.entries.empty());
  for (const sim::PlanEntry& e : g.entries) REQUIRE(e.config.compression == "none");
  REQUIRE(std::count_if(g.skipped.begin(), g.skipped.end(), [](const sim::PlanSkip& s) {
            return s.config.compression == "topk" && s.reason.find("a100-80gb (a GPU)") != std::string::npos &&
                   s.reason.find("device memory") != std::string::npos;
          }) == 1);
  REQUIRE(g.compression_verdict().compared == 0);
  o.compressions = {"topk"};
  REQUIRE(simtest::lacks(simtest::error_of([&] { sim::plan(o, simtest::star(4, 100e9, 2'000'000), cat); }),
                         {"a GPU", "--compressions none"}) == "");
}

TEST_CASE("the planner refuses unknown, repeated and 16-bit-reduced compressions", "[sim][planner][topk]") {
  const sim::Topology topo = sim::Topology::preset("cpu-host:2");
  sim::PlanOptions o = small_plan();
  o.compressions = {"none", "zip"};
  REQUIRE(simtest::lacks(simtest::error_of([&] { sim::plan(o, topo, sim::DeviceCatalog{}); }),
                         {"compression 'zip'", "none and/or topk"}) == "");
  o.compressions = {"topk", "topk"};
  REQUIRE(simtest::lacks(simtest::error_of([&] { sim::plan(o, topo, sim::DeviceCatalog{}); }), {"topk", "twice"}) ==
          "");
  o.compressions = {};
  REQUIRE(simtest::lacks(simtest::error_of([&] { sim::plan(o, topo, sim::DeviceCatalog{}); }),
                         {"no gradient compression"}) == "");
  o.compressions = {"topk"};
  o.train.grad_reduce = nn::Precision::BF16;
  REQUIRE(simtest::lacks(simtest::error_of([&] { sim::plan(o, topo, sim::DeviceCatalog{}); }),
                         {"topk sends f32 values", "bf16", "grad_reduce_dtype fp32"}) == "");
}

TEST_CASE("pipeline stages and micro-batches are planner dimensions, and only they fit a cap",
          "[sim][planner][pipeline]") {
  sim::PlanAxes axes{{"W", "H"}, {"none", "block"}};
  axes.pipeline_stages = {1, 2, 4};
  axes.micro_batches = {1, 2};
  const auto configs = sim::enumerate_plan_configs(4, axes);
  int pipelined = 0;
  for (const sim::PlanConfig& c : configs) {
    REQUIRE(c.dp * c.pp * c.sp_h * c.sp_w == 4);
    REQUIRE((c.pp > 1) == (c.mesh.find("pp=" + std::to_string(c.pp)) != std::string::npos));
    pipelined += c.pp > 1;
  }
  // dp=1: pp 1 (sp=4 W, H), 2 (sp=2 W, H), 4 (one mesh); dp=2: pp 1 (W, H), 2 (one); dp=4: one.
  REQUIRE(configs.size() == 9 * 2 * 2);
  REQUIRE(pipelined == 4 * 2 * 2);

  sim::PlanOptions o;
  o.train = simtest::small_run("convnext");
  o.train.batch = 4;
  o.shards = {"W"};
  o.checkpointing = {"none"};
  o.pipeline_stages = {1, 2};
  o.micro_batches = {1, 2};
  o.exhaustive = true;
  const sim::Topology topo = simtest::star(2, 1e11, 1000);
  const sim::DeviceCatalog cat;
  const sim::PlanResult all = sim::plan(o, topo, cat);
  // sp=2, dp=2 and pp=2, each with one and two micro-batches.
  REQUIRE(all.entries.size() == 6);
  double cap = 0;
  for (const sim::PlanEntry& e : all.entries) {
    INFO(sim::describe(e.config) << " peak " << e.peak_bytes);
    if (e.config.pp > 1)
      REQUIRE(e.config.stage_starts ==
              sim::balanced_stage_starts(sim::detail_plan::options_for(o.train, e.config),
                                         core::DeviceMesh::parse(e.config.mesh),
                                         cat.get("a100-80gb")));
    else
      REQUIRE(e.config.stage_starts.empty());
    if (e.config.pp == 1 && e.config.micro_batches == 1)
      cap = cap == 0 ? double(e.peak_bytes) : std::min(cap, double(e.peak_bytes));
    std::printf("plan with pp and M: %-12s M=%d peak %zu B, %.3f ms\n", e.config.mesh.c_str(),
                e.config.micro_batches, e.peak_bytes, e.iteration_s * 1e3);
  }
  o.memory_cap_bytes = cap - 1;  // under every plan without stages or micro-batches
  o.exhaustive = false;
  const sim::PlanResult capped = sim::plan(o, topo, cat);
  REQUIRE(capped.best_fit() >= 0);
  for (const sim::PlanEntry& e : capped.entries) {
    INFO(sim::describe(e.config));
    if (e.fits) REQUIRE((e.config.pp > 1 || e.config.micro_batches > 1));
    if (e.simulated) REQUIRE(e.lower_bound_s <= e.iteration_s);
  }
}

TEST_CASE("where parameters dominate, only pipeline stages fit a tight cap",
          "[sim][planner][pipeline]") {
  sim::PlanOptions o;
  o.train = simtest::small_run("convnext");
  o.train.model.widths = {16, 32, 128, 256};  // parameters (and AdamW state) over activations
  o.train.input = {3, 64, 64};
  o.shards = {"W"};
  o.checkpointing = {"none"};
  o.pipeline_stages = {1, 2};
  o.micro_batches = {1, 2};
  o.exhaustive = true;
  const sim::Topology topo = simtest::star(2, 1e11, 1000);
  const sim::DeviceCatalog cat;
  double cap = 0;
  for (const sim::PlanEntry& e : sim::plan(o, topo, cat).entries) {
    std::printf("plan, parameters dominate: %-6s M=%d peak %zu B\n", e.config.mesh.c_str(),
                e.config.micro_batches, e.peak_bytes);
    if (e.config.pp == 1)
      cap = cap == 0 ? double(e.peak_bytes) : std::min(cap, double(e.peak_bytes));
  }
  o.memory_cap_bytes = cap - 1;  // under every plan without stages, micro-batches or not
  o.exhaustive = false;
  const sim::PlanResult capped = sim::plan(o, topo, cat);
  REQUIRE(capped.best_fit() >= 0);
  for (const sim::PlanEntry& e : capped.entries)
    if (e.fits) REQUIRE(e.config.pp == 2);
}
