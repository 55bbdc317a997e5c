// The planner on a small ConvNeXt over 4 GPUs: the candidates it enumerates, a table sorted by
// iteration time, memory fit flags that agree with replaying each configuration directly (under
// the device capacity and under a cap that splits the table), and configurations the batch or the
// input cannot support skipped with core's reason; precision as a dimension (bf16 rows of
// ConvNeXt-T on a DGX-A100 with half the activations and a shorter iteration than their fp32
// twins).
#include <algorithm>
#include <cstdio>

#include "sim_test_util.hpp"
#include "support/catch.hpp"
#include "tessera/nn/models.hpp"
#include "tessera/sim/planner.hpp"

using namespace tessera;

namespace {

sim::PlanOptions small_plan() {
  sim::PlanOptions o;
  o.train = simtest::small_run("convnext");
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
