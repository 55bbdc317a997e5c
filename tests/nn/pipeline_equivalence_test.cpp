// Micro-batches and pipeline stages (TrainOptions::micro_batches, a mesh dim named "pp") change
// where and when the model runs, never what it computes: a pipelined run equals the one-rank run
// with the same micro-batches under the float32 rule (train_equivalence.hpp), and in float64 to
// 1e-9; both schedules give the same bits; checkpoints move between pp=2 and one rank; and the
// deliberately broken pipelines (TrainOptions::defect) fail the comparison or stop with an error.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "nn/pipeline_harness.hpp"
#include "support/catch.hpp"
#include "train_equivalence.hpp"
#include "train_models.hpp"

using namespace tessera;
using nn::PipelineSchedule;
using test::StagedRun;
using test::TrainRun;

namespace {

/// The small models of train_models.hpp on 3x32x64 (sp=2 splits W into 32 and 32), 3 steps.
/// ConvNeXt: batch 6 (two samples per micro-batch at M = 3, one per dp replica at dp=2).
/// RegNetY: batch 12, so that each micro-batch's BatchNorm still normalises over 4 samples: with
/// 2 (batch 6, M = 3) its last stage normalises 8 values per channel, and the float32 run on
/// dp=2,sp=2 measured 4.6x the rule's allowance with or without pp (at its gradient norm), while
/// the float64 runs are equal to 1e-9: float32 rounding amplified, not a sharding error.
nn::TrainOptions pipe_options(bool regnet, int micro_batches) {
  nn::TrainOptions o = test::options(regnet ? test::small_regnety() : test::small_convnext(),
                                     regnet ? "sgd" : "adamw");
  o.input = {3, 32, 64};
  o.batch = regnet ? 12 : 6;
  o.steps = 3;
  o.micro_batches = micro_batches;
  return o;
}

/// The number of units (Trainer::units()) of the model of `o`.
int unit_count(const nn::TrainOptions& o) { return static_cast<int>(test::unit_kinds(o).size()); }

/// Four stages of 1, 2, units − 8 and 4 units: far from the balanced cut, so stages differ; the
/// last begins before the head (a stage must begin where a 4-d activation crosses).
std::vector<int> uneven_starts(const nn::TrainOptions& o) {
  const int n = unit_count(o);
  REQUIRE(n >= 10);
  return {1, 3, n - 4};
}

const core::DeviceMesh kOneRank({1}, {"sp"});

struct MeshCase {
  const char* mesh;
  bool uneven;  ///< explicit stage starts (pp=4), else the balanced cut
};
constexpr MeshCase kMeshes[] = {
    {"pp=2", false}, {"pp=4", true}, {"pp=2,sp=2", false}, {"dp=2,pp=2,sp=2", false}};

/// The run's stages tile the model, its parameters are the one-rank run's, in the same order, and
/// it passes the float32 rule.
void require_staged_equivalent(const StagedRun& r, const test::Fp32References& refs) {
  INFO(r.layout_problems);
  REQUIRE(r.layout_problems.empty());
  REQUIRE(r.run.names == refs.one64.names);
  REQUIRE_FP32_EQUIVALENT(r.run, refs);
}

/// Both schedules on every mesh of kMeshes, M = 1 and 3, against the one-rank run with the same
/// M: 1F1B under the float32 rule, GPipe equal to 1F1B bit for bit (both accumulate the
/// micro-batches' gradients in increasing order).
void check_pipelines_equal_one_rank(bool regnet) {
  for (const int m : {1, 3}) {
    const nn::TrainOptions o = pipe_options(regnet, m);
    const test::Fp32References refs = test::fp32_references(o);
    for (const MeshCase& c : kMeshes) {
      nn::TrainOptions p = o;
      if (c.uneven) p.stage_starts = uneven_starts(o);
      INFO((regnet ? "RegNetY" : "ConvNeXt") << " on " << c.mesh << ", M = " << m);
      const StagedRun one_f_one_b = test::train_staged(p, core::DeviceMesh::parse(c.mesh));
      require_staged_equivalent(one_f_one_b, refs);
      p.schedule = PipelineSchedule::GPipe;
      const StagedRun gpipe = test::train_staged(p, core::DeviceMesh::parse(c.mesh));
      REQUIRE(gpipe.layout_problems.empty());
      REQUIRE(gpipe.run.replicas_agree);
      REQUIRE(gpipe.run.losses == one_f_one_b.run.losses);
      REQUIRE(gpipe.run.grad_norms == one_f_one_b.run.grad_norms);
      REQUIRE(gpipe.run.params == one_f_one_b.run.params);
    }
  }
}

/// The files a save to `path` left: `path` and any beside it whose name begins with its name.
std::vector<std::string> saved_files(const std::string& path) {
  const std::filesystem::path p(path);
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(p.parent_path())) {
    const std::string name = e.path().filename().string();
    if (name.rfind(p.filename().string(), 0) == 0) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void remove_saved(const std::string& path) {
  for (const std::string& name : saved_files(path))
    std::filesystem::remove(std::filesystem::path(path).parent_path() / name);
}

std::string temp_checkpoint(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera_test_pipeline_" + name + ".ckpt"))
      .string();
}

}  // namespace

TEST_CASE("pipelined ConvNeXt training equals the one-rank run with the same micro-batches",
          "[nn][train][pipeline]") {
  check_pipelines_equal_one_rank(false);
}

TEST_CASE(
    "pipelined RegNetY training (BatchNorm, SE) equals the one-rank run with the same "
    "micro-batches",
    "[nn][train][pipeline]") {
  check_pipelines_equal_one_rank(true);
}

TEST_CASE(
    "in float64 pipelined training equals the one-rank run with the same micro-batches to 1e-9",
    "[nn][train][pipeline]") {
  const struct {
    const char* mesh;
    bool uneven;
    PipelineSchedule schedule;
  } cases[] = {{"pp=2", false, PipelineSchedule::GPipe},
               {"pp=4", true, PipelineSchedule::OneFOneB},
               {"dp=2,pp=2,sp=2", false, PipelineSchedule::OneFOneB}};
  for (const bool regnet : {false, true}) {
    nn::TrainOptions o = pipe_options(regnet, 3);
    o.dtype = core::DType::F64;
    const TrainRun ref = test::train(o, kOneRank);
    for (const auto& c : cases) {
      nn::TrainOptions p = o;
      p.schedule = c.schedule;
      if (c.uneven) p.stage_starts = uneven_starts(o);
      INFO((regnet ? "RegNetY" : "ConvNeXt")
           << " on " << c.mesh << ", " << nn::pipeline_schedule_name(c.schedule));
      test::require_close_runs(test::train_staged(p, core::DeviceMesh::parse(c.mesh)), ref, 1e-9);
    }
  }
}

// A stage keeps each in-flight micro-batch's input (its stem saves it for the weight gradient)
// until that micro-batch's backward, past later take()s of a prefetching loader, which refill the
// slots of earlier steps: the run must not read a later micro-batch's images there.
TEST_CASE("a pipeline with a prefetching loader equals the one without, bit for bit",
          "[nn][train][pipeline]") {
  for (const PipelineSchedule schedule : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB}) {
    nn::TrainOptions o = pipe_options(false, 3);
    o.schedule = schedule;
    o.loader.prefetch = 0;
    const StagedRun sync = test::train_staged(o, core::DeviceMesh::parse("pp=2"));
    o.loader.prefetch = 2;
    const StagedRun ahead = test::train_staged(o, core::DeviceMesh::parse("pp=2"));
    INFO(nn::pipeline_schedule_name(schedule));
    REQUIRE(ahead.run.losses == sync.run.losses);
    REQUIRE(ahead.run.params == sync.run.params);
  }
}

// Gradient accumulation on one stage: without BatchNorm the micro-batches' gradients add up to
// the whole batch's (float64: to 1e-9; float32: by the rule against the M = 1 references, with
// DropPath drawn per sample of the step, not of the micro-batch); with BatchNorm each micro-batch
// is normalised by its own statistics, so the run differs from M = 1.
TEST_CASE("micro-batches on one stage (pp=1) equal the whole batch, BatchNorm aside",
          "[nn][train][pipeline]") {
  SECTION("ConvNeXt: M = 3 equals M = 1") {
    const nn::TrainOptions o = pipe_options(false, 1);
    const test::Fp32References refs = test::fp32_references(o);
    nn::TrainOptions m3 = o;
    m3.micro_batches = 3;
    require_staged_equivalent(test::train_staged(m3, core::DeviceMesh::parse("pp=1")), refs);
    m3.dtype = core::DType::F64;
    test::require_close_runs(test::train_staged(m3, kOneRank), refs.one64, 1e-9);
  }
  SECTION("RegNetY: M = 3 normalises each micro-batch by itself") {
    nn::TrainOptions o = pipe_options(true, 1);
    o.dtype = core::DType::F64;
    const TrainRun whole = test::train(o, kOneRank);
    o.micro_batches = 3;
    const TrainRun micro = test::train(o, kOneRank);
    INFO("step 0 loss: M = 1 " << whole.losses[0] << ", M = 3 " << micro.losses[0]);
    REQUIRE(std::abs(micro.losses[0] - whole.losses[0]) > 1e-6 * std::abs(whole.losses[0]));
  }
}

TEST_CASE("a checkpoint saved on pp=2 continues on one rank, and the reverse",
          "[nn][train][pipeline][checkpoint]") {
  nn::TrainOptions o = pipe_options(false, 3);
  o.dtype = core::DType::F64;
  o.steps = 4;
  o.clip_norm = 0.5;
  const TrainRun full = test::train(o, kOneRank);
  nn::TrainOptions first = o;
  first.steps = 2;
  const bool to_one_rank = GENERATE(true, false);
  const core::DeviceMesh save_on = to_one_rank ? core::DeviceMesh::parse("pp=2") : kOneRank;
  const core::DeviceMesh load_on = to_one_rank ? kOneRank : core::DeviceMesh::parse("pp=2");
  INFO("saved on " << save_on.to_string() << ", loaded on " << load_on.to_string());
  const std::string path = temp_checkpoint(save_on.to_string());
  const StagedRun a = test::train_staged(first, save_on, {}, [&](nn::Trainer& t) { t.save(path); });
  const StagedRun b = test::train_staged(o, load_on, [&](nn::Trainer& t) {
    t.load(path);
    REQUIRE(t.next_step() == 2);
  });
  remove_saved(path);
  REQUIRE(a.layout_problems.empty());
  REQUIRE(b.run.losses.size() == 2);
  StagedRun continued = b;
  continued.run.losses = {a.run.losses[0], a.run.losses[1], b.run.losses[0], b.run.losses[1]};
  continued.run.grad_norms = {a.run.grad_norms[0], a.run.grad_norms[1], b.run.grad_norms[0],
                              b.run.grad_norms[1]};
  test::require_close_runs(continued, full, 1e-9);
  REQUIRE((to_one_rank ? b : a).max_pipeline_wait_s == 0);  // no pp, no wait
}

// A pipelined checkpoint is one file per stage (PATH, PATH.stage<k>), each written atomically by
// its stage; loading checks that they are all there and of one step, so an interrupted save (stage
// files of different steps) or a lost stage file is refused, naming the file.
TEST_CASE(
    "a pipelined checkpoint is a file per stage, and a missing or stale stage file is refused",
    "[nn][train][pipeline][checkpoint]") {
  nn::TrainOptions o = pipe_options(false, 3);
  o.steps = 4;
  const std::string path = temp_checkpoint("per_stage"), later = temp_checkpoint("per_stage_later");
  remove_saved(path);
  remove_saved(later);
  nn::TrainOptions first = o;
  first.steps = 2;
  test::train_staged(first, core::DeviceMesh::parse("dp=2,pp=2"), {},
                     [&](nn::Trainer& t) { t.save(path); });
  nn::TrainOptions second = o;
  second.steps = 3;
  test::train_staged(second, core::DeviceMesh::parse("dp=2,pp=2"), {},
                     [&](nn::Trainer& t) { t.save(later); });
  const std::string name = std::filesystem::path(path).filename().string();
  const std::vector<std::string> files = saved_files(path);
  auto load_error = [&] {
    try {
      test::train_staged(o, kOneRank, [&](nn::Trainer& t) { t.load(path); });
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string complete = load_error();
  // Stage 1's file of a later save beside stage 0's of an earlier one: an interrupted save.
  std::filesystem::copy_file(later + ".stage1", path + ".stage1",
                             std::filesystem::copy_options::overwrite_existing);
  const std::string stale = load_error();
  std::filesystem::remove(path + ".stage1");
  const std::string missing = load_error();
  remove_saved(path);
  remove_saved(later);
  REQUIRE(files == std::vector<std::string>{name, name + ".stage1"});
  INFO(complete);
  REQUIRE(complete.empty());
  REQUIRE_THAT(stale, Catch::Matchers::Contains("a save was interrupted") &&
                          Catch::Matchers::Contains(".stage1"));
  REQUIRE_THAT(missing, Catch::Matchers::Contains(".stage1"));
}

TEST_CASE("the trainer refuses micro-batches that do not divide the batch and bad stage starts",
          "[nn][train][pipeline]") {
  nn::TrainOptions o = pipe_options(false, 4);  // 6 samples into 4 micro-batches
  REQUIRE_THROWS_AS(test::train_staged(o, kOneRank), InvalidArgument);
  o.micro_batches = 6;  // one sample per micro-batch cannot cover dp=2
  REQUIRE_THROWS_AS(test::train_staged(o, core::DeviceMesh::parse("dp=2")), InvalidArgument);
  o.micro_batches = 3;
  o.stage_starts = {0};
  REQUIRE_THROWS_AS(test::train_staged(o, core::DeviceMesh::parse("pp=2")), InvalidArgument);
  o.stage_starts = {1, 2};  // two starts for two stages
  REQUIRE_THROWS_AS(test::train_staged(o, core::DeviceMesh::parse("pp=2")), InvalidArgument);
}

// The comparison must catch a broken pipeline: a dropped micro-batch fails the float32 rule by far,
// and gradients sent to the wrong stage stop the run with an error within the comm deadline.
TEST_CASE("the equivalence rule fails deliberately broken pipelines", "[nn][train][pipeline]") {
  nn::TrainOptions o = pipe_options(false, 3);
  SECTION("a dropped micro-batch (pp=2) fails the float32 rule") {
    const test::Fp32References refs = test::fp32_references(o);
    o.defect = nn::TrainOptions::Defect::DropMicroBatch;
    const StagedRun r = test::train_staged(o, core::DeviceMesh::parse("pp=2"));
    const test::Fp32Verdict v = test::fp32_verdict(r.run, refs);
    INFO("worst " << v.worst << " of the allowance at " << v.worst_at);
    REQUIRE_FALSE(v.ok);
    REQUIRE(v.worst > 100);
  }
  SECTION("gradients sent to the wrong stage (pp=4) stop the run with an error, not a hang") {
    o.defect = nn::TrainOptions::Defect::GradToWrongStage;
    const auto start = std::chrono::steady_clock::now();
    std::string error;
    try {
      test::train_staged(o, core::DeviceMesh::parse("pp=4"), {}, {}, std::chrono::seconds(3));
    } catch (const Error& e) {
      error = e.what();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO("error after " << seconds << " s: " << error);
    REQUIRE_FALSE(error.empty());
    REQUIRE(seconds < 30);
  }
}
