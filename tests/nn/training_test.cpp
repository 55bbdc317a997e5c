// End-to-end training: sharded runs equal the one-rank run (losses and final parameters), the
// synthetic task is learnable, gradient clipping uses the global norm.
#include <cmath>
#include <chrono>
#include <cstdio>

#include "support/catch.hpp"
#include "train_harness.hpp"

using namespace tessera;
using test::TrainRun;

namespace {

nn::ModelSpec small_convnext() {
  nn::ModelSpec m;
  m.name = "test-convnext";
  m.family = "convnext";
  m.depths = {1, 1, 2, 1};
  m.widths = {8, 16, 16, 24};
  m.num_classes = 4;
  m.drop_path = 0.2;  // DropPath on: every shard of a sample must agree, or runs diverge
  m.layer_scale_init = 0.5;
  return m;
}

nn::ModelSpec small_regnety() {
  nn::ModelSpec m;
  m.name = "test-regnety";
  m.family = "regnet";
  m.depths = {1, 1, 2, 1};
  m.widths = {8, 16, 24, 32};
  m.stem_width = 8;
  m.group_width = 8;
  m.se_ratio = 0.25;  // RegNetY: squeeze-and-excitation in every block; BN is SyncBN
  m.num_classes = 4;
  return m;
}

nn::TrainOptions options(const nn::ModelSpec& m, const std::string& optimizer) {
  nn::TrainOptions o;
  o.model = m;
  o.input = {3, 32, 160};  // W = 5 units of the total stride 32: sp=3 gets 64, 64, 32
  o.batch = 4;
  o.steps = 10;
  o.seed = 3;
  o.optimizer.kind = optimizer;
  // SGD with momentum on this small BN network is chaotic at learning rates of 0.01 and more:
  // within 10 steps a rounding difference of 1e-7 grows to 1e-2, the float32 one-rank run then
  // differs from the float64 one as much as any sharded run does (measured). At 0.005 float32
  // runs stay within 3e-5 of float64, so the comparison below tests sharding, not chaos; the
  // float64 test further down covers the chaotic settings at 1e-9.
  o.optimizer.lr = optimizer == "sgd" ? 0.005 : 2e-3;
  o.warmup_steps = 2;
  return o;
}

struct MeshCase {
  const char* text;
  const char* shard;
};

void require_equal_runs(const TrainRun& r, const TrainRun& ref, double rtol = 1e-4) {
  REQUIRE(r.replicas_agree);
  REQUIRE(r.params.size() == ref.params.size());
  for (std::size_t i = 0; i < r.params.size(); ++i) {
    INFO("parameter " << ref.names[i]);
    REQUIRE_CLOSE(r.params[i], ref.params[i], rtol);
  }
  REQUIRE(r.losses.size() == ref.losses.size());
  for (std::size_t i = 0; i < r.losses.size(); ++i) {
    INFO("step " << i << ": loss " << r.losses[i] << " vs one rank " << ref.losses[i]);
    REQUIRE(std::abs(r.losses[i] - ref.losses[i]) <= rtol * std::abs(ref.losses[i]));
    REQUIRE(std::abs(r.grad_norms[i] - ref.grad_norms[i]) <= rtol * std::abs(ref.grad_norms[i]));
  }
}

void check_sharded_equals_unsharded(const nn::TrainOptions& o, bool along_h) {
  const TrainRun ref = test::train(o, core::DeviceMesh({1}, {"sp"}));
  REQUIRE(ref.losses.size() == 10);
  const MeshCase cases[] = {{"sp=2", "W"}, {"sp=3", "W"}, {"sp=4", "W"}, {"dp=2,sp=2", "W"}, {"sp=2", "H"}};
  for (const MeshCase& mc : cases) {
    if (!along_h && std::string(mc.shard) == "H") continue;
    DYNAMIC_SECTION(mc.text << " along " << mc.shard) {
      nn::TrainOptions so = o;
      so.shard = mc.shard;
      if (std::string(mc.shard) == "H") so.input = {3, 64, 32};
      const TrainRun one = so.input == o.input ? ref : test::train(so, core::DeviceMesh({1}, {"sp"}));
      require_equal_runs(test::train(so, core::DeviceMesh::parse(mc.text)), one);
    }
  }
}

}  // namespace

TEST_CASE("sharded ConvNeXt training equals the one-rank run (AdamW, clipping, DropPath)", "[nn][train]") {
  nn::TrainOptions o = options(small_convnext(), "adamw");
  o.clip_norm = 0.5;
  check_sharded_equals_unsharded(o, true);
}

TEST_CASE("sharded segmentation training equals the one-rank run (per-pixel loss over shards)",
          "[nn][train]") {
  nn::TrainOptions o = options(small_convnext(), "adamw");
  o.model.task = nn::Task::Segment;
  o.model.num_classes = 5;
  o.steps = 6;
  const TrainRun ref = test::train(o, core::DeviceMesh({1}, {"sp"}));
  REQUIRE(ref.losses.front() > 1.0);
  for (const char* mesh : {"sp=3", "dp=2,sp=2"}) {
    INFO(mesh);
    require_equal_runs(test::train(o, core::DeviceMesh::parse(mesh)), ref);
  }
  o.dtype = core::DType::F64;
  const TrainRun ref64 = test::train(o, core::DeviceMesh({1}, {"sp"}));
  require_equal_runs(test::train(o, core::DeviceMesh::parse("sp=4")), ref64, 1e-9);
}

// Tagged [rounding]: float32 equality to 1e-4 after 10 steps holds for the optimised build (FMA).
// Built without FMA (the asan preset), the tiny BN and SE biases (|b| down to 1e-4) of sharded
// and one-rank runs end up to 3e-6 apart, several times 1e-4 of their own scale, so the asan
// stage leaves this test out (label rounding); it runs in the main stage, and the float64 test
// below holds the semantics to 1e-9 in both.
TEST_CASE("sharded RegNetY training equals the one-rank run (SGD, SyncBN, SE)", "[nn][train][rounding]") {
  // Along H at 3x64x32 the float32 one-rank run itself drifts 1e-4 from float64 on the stem's
  // BN bias within 10 steps; H sharding of RegNetY is checked in float64 below.
  check_sharded_equals_unsharded(options(small_regnety(), "sgd"), false);
}

TEST_CASE("in float64 sharded training equals the one-rank run to 1e-9, chaotic settings included",
          "[nn][train]") {
  // The float64 run separates rounding from bugs: a missing halo row, a wrong reduction or a
  // rank-dependent DropPath would show as a difference far above 1e-9.
  for (const bool convnext : {true, false}) {
    nn::TrainOptions o = options(convnext ? small_convnext() : small_regnety(), convnext ? "adamw" : "sgd");
    o.dtype = core::DType::F64;
    o.optimizer.lr = convnext ? 4e-3 : 0.05;
    o.clip_norm = convnext ? 0.5 : 0;
    const TrainRun ref = test::train(o, core::DeviceMesh({1}, {"sp"}));
    for (const char* mesh : {"sp=3", "dp=2,sp=2"}) {
      INFO((convnext ? "ConvNeXt on " : "RegNetY on ") << mesh);
      require_equal_runs(test::train(o, core::DeviceMesh::parse(mesh)), ref, 1e-9);
    }
    nn::TrainOptions t = o;  // along H, and on 2-D tiles
    t.input = {3, 64, 96};
    t.steps = 6;
    const TrainRun tref = test::train(t, core::DeviceMesh({1}, {"sp"}));
    for (const char* mesh : {"sp=2", "sp_h=2,sp_w=3"}) {
      t.shard = "H";
      INFO((convnext ? "ConvNeXt on " : "RegNetY on ") << mesh << " (H)");
      require_equal_runs(test::train(t, core::DeviceMesh::parse(mesh)), tref, 1e-9);
    }
  }
}

TEST_CASE("sharded 2-D tiles and block checkpointing equal the one-rank run", "[nn][train]") {
  nn::TrainOptions o = options(small_convnext(), "adamw");
  o.input = {3, 64, 96};
  o.steps = 4;
  o.optimizer.lr = 1e-3;
  const TrainRun ref = test::train(o, core::DeviceMesh({1}, {"sp"}));
  SECTION("sp_h=2 x sp_w=3") { require_equal_runs(test::train(o, core::DeviceMesh::parse("sp_h=2,sp_w=3")), ref); }
  SECTION("block checkpointing, sp=2") {
    o.checkpointing = "block";
    require_equal_runs(test::train(o, core::DeviceMesh::parse("sp=2")), ref);
  }
  SECTION("stage checkpointing, one rank") {
    o.checkpointing = "stage";
    require_equal_runs(test::train(o, core::DeviceMesh({1}, {"sp"})), ref);
  }
}

TEST_CASE("gradient clipping scales by the global norm, reduced across ranks", "[nn][train]") {
  nn::TrainOptions o = options(small_convnext(), "sgd");
  o.steps = 3;
  o.warmup_steps = 0;
  o.optimizer.momentum = 0;
  o.optimizer.weight_decay = 0;
  const TrainRun free = test::train(o, core::DeviceMesh::parse("sp=2"));
  const double clip = free.grad_norms[0] / 4;  // the first step's norm is well above the clip
  o.clip_norm = clip;
  o.steps = 1;
  const TrainRun one = test::train(o, core::DeviceMesh({1}, {"sp"}));
  const TrainRun sharded = test::train(o, core::DeviceMesh::parse("sp=4"));
  nn::TrainOptions o0 = o;
  o0.clip_norm = 0;
  o0.optimizer.lr = 0;  // the initial parameters
  const TrainRun init = test::train(o0, core::DeviceMesh({1}, {"sp"}));
  // With plain SGD and no decay, the update is −lr·g·clip/‖g‖: its global norm is lr·clip.
  double sq = 0;
  for (std::size_t i = 0; i < one.params.size(); ++i)
    for (std::size_t k = 0; k < one.params[i].size(); ++k) {
      const double d = one.params[i][k] - init.params[i][k];
      sq += d * d;
    }
  const double lr = one.lrs[0];
  REQUIRE(lr > 0);
  INFO("update norm " << std::sqrt(sq) << ", expected lr * clip = " << lr * clip);
  REQUIRE(std::abs(std::sqrt(sq) - lr * clip) <= 1e-3 * lr * clip);
  require_equal_runs(sharded, one);
  REQUIRE(std::abs(sharded.grad_norms[0] - free.grad_norms[0]) <= 1e-5 * free.grad_norms[0]);
}

TEST_CASE("the synthetic task is learnable: a small ConvNeXt's loss falls well below its start",
          "[nn][train]") {
  nn::TrainOptions o = options(small_convnext(), "adamw");
  o.model.drop_path = 0;
  o.model.widths = {16, 32, 32, 48};
  o.input = {3, 32, 64};
  o.batch = 16;
  o.steps = 100;
  o.optimizer.lr = 4e-3;
  o.warmup_steps = 5;
  o.final_lr_fraction = 0.1;
  const TrainRun r = test::train(o, core::DeviceMesh::parse("sp=2"));
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += r.losses[i] / 5;
  for (int i = 90; i < 100; ++i) last += r.losses[i] / 10;
  std::printf("learnability: mean loss of steps 1-5 %.3f, of steps 91-100 %.3f (chance ln 4 = %.3f)\n", first,
              last, std::log(4.0));
  INFO("first five steps " << first << ", last ten " << last);
  REQUIRE(first > 1.2);
  REQUIRE(last < 0.5 * first);
}
