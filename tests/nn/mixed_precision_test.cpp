// Mixed-precision training (bf16, fp16 with f32 master weights): sharded runs equal the one-rank
// run by the 16-bit form of the float32 rule, bf16 training tracks fp32, fp16 loss scaling skips
// overflowing steps on every rank and prevents underflow, and 16-bit activations take half the
// booked bytes. The figures are printed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "support/catch.hpp"
#include "train_equivalence.hpp"
#include "train_harness.hpp"
#include "train_models.hpp"

using namespace tessera;
using core::MemCategory;
using test::TrainRun;
using test::options;
using test::small_convnext;
using test::small_regnety;

namespace {

nn::TrainOptions in_precision(nn::TrainOptions o, nn::Precision p) {
  o.precision = p;
  return o;
}

// The 16-bit rule is the float32 rule of train_equivalence.hpp with the one-rank run taken in
// the same precision: the float64 one-rank run is the exact answer; the one-rank bf16 (fp16) run's
// distance from it is what 16-bit storage does to this model and input (u = 2^-8 for bf16, 2^-11
// for fp16, per stored activation, against f32's 2^-24); a sharded 16-bit run computes every
// activation from the same inputs by the same arithmetic, only the f32 partial sums inside a
// kernel are ordered differently, and a difference of one f32 rounding turns into one of one
// 16-bit rounding in the few values it flips: of the same size as the one-rank run's own. So a
// sharded 16-bit run passes when it is within kFp32Factor times the one-rank 16-bit distance.
// That the rule still catches bugs at this looser scale is checked below with the fault runs.
void check_grid(const nn::TrainOptions& o, const char* what) {
  const test::Fp32References refs = test::fp32_references(o);
  REQUIRE(refs.one32.losses.size() == std::size_t(o.steps));
  for (const char* mesh : {"sp=2", "sp=3", "sp=4", "dp=2,sp=2"}) {
    DYNAMIC_SECTION(what << " on " << mesh) {
      const TrainRun r = test::train(o, core::DeviceMesh::parse(mesh));
      const auto v = test::fp32_verdict(r, refs);
      std::printf("%s on %s: worst %.3f of the 16-bit allowance (at %s)\n", what, mesh, v.worst, v.worst_at.c_str());
      REQUIRE_FP32_EQUIVALENT(r, refs);
    }
  }
}

}  // namespace

TEST_CASE("sharded bf16 ConvNeXt training equals the one-rank bf16 run (the 16-bit rule)", "[nn][train][precision]") {
  check_grid(in_precision(options(small_convnext(), "adamw"), nn::Precision::BF16), "bf16 ConvNeXt");
}

TEST_CASE("sharded fp16 ConvNeXt training with loss scaling equals the one-rank fp16 run", "[nn][train][precision]") {
  nn::TrainOptions o = in_precision(options(small_convnext(), "adamw"), nn::Precision::FP16);
  o.loss_scale.init = 1024;  // dynamic (auto for fp16); no overflow at this scale on this model
  check_grid(o, "fp16 ConvNeXt");
}

TEST_CASE("sharded bf16 RegNetY training (SyncBN, SE) equals the one-rank bf16 run", "[nn][train][precision]") {
  const nn::TrainOptions o = in_precision(options(small_regnety(), "sgd"), nn::Precision::BF16);
  const test::Fp32References refs = test::fp32_references(o);
  for (const char* mesh : {"sp=3", "dp=2,sp=2"}) {
    INFO(mesh);
    REQUIRE_FP32_EQUIVALENT(test::train(o, core::DeviceMesh::parse(mesh)), refs);
  }
}

TEST_CASE("sharded bf16 2-D tiles, along H and with 16-bit gradient reduction equal the one-rank run",
          "[nn][train][precision]") {
  nn::TrainOptions o = in_precision(options(small_convnext(), "adamw"), nn::Precision::BF16);
  o.input = {3, 64, 96};
  o.steps = 4;
  o.optimizer.lr = 1e-3;
  const test::Fp32References refs = test::fp32_references(o);
  SECTION("sp_h=2 x sp_w=2") { REQUIRE_FP32_EQUIVALENT(test::train(o, core::DeviceMesh::parse("sp_h=2,sp_w=2")), refs); }
  SECTION("sp=2 along H") {
    nn::TrainOptions h = o;
    h.shard = "H";
    REQUIRE_FP32_EQUIVALENT(test::train(h, core::DeviceMesh::parse("sp=2")), test::fp32_references(h));
  }
  SECTION("bf16 gradient all-reduce, dp=2 x sp=2") {
    // Buckets rounded to bf16 before the reduction: one more bf16 rounding per gradient (a
    // relative 2^-8), of the size of what bf16 activations already do to them.
    nn::TrainOptions g = o;
    g.grad_reduce = nn::Precision::BF16;
    REQUIRE_FP32_EQUIVALENT(test::train(g, core::DeviceMesh::parse("dp=2,sp=2")), refs);
  }
}

TEST_CASE("the 16-bit rule fails deliberately broken bf16 runs", "[nn][train][precision]") {
  const nn::TrainOptions o = in_precision(options(small_convnext(), "adamw"), nn::Precision::BF16);
  const test::Fp32References refs = test::fp32_references(o);
  for (test::Fault f : {test::Fault::HaloZero, test::Fault::HaloBackwardZero, test::Fault::GradMissingRank}) {
    const TrainRun r = test::train(o, core::DeviceMesh::parse("sp=3"), {}, {}, f);
    const auto v = test::fp32_verdict(r, refs);
    std::printf("bf16 ConvNeXt on sp=3 with %s: %.1f times the 16-bit allowance\n", test::fault_name(f), v.worst);
    INFO(test::fault_name(f) << ": worst " << v.worst << " at " << v.worst_at);
    REQUIRE(r.faults_injected > 0);
    REQUIRE_FALSE(v.ok);
    REQUIRE(v.worst > 4);  // not a near miss: a bug is far outside 16-bit rounding
  }
}

TEST_CASE("bf16 training tracks fp32: the loss curve stays in a band over 200 steps", "[nn][train][precision]") {
  // The learnability setting of training_test.cpp, twice as long, on one rank and on sp=2 in bf16.
  nn::TrainOptions o = options(small_convnext(), "adamw");
  o.model.drop_path = 0;
  o.model.widths = {16, 32, 32, 48};
  o.input = {3, 32, 64};
  o.batch = 16;
  o.steps = 200;
  o.optimizer.lr = 4e-3;
  o.warmup_steps = 5;
  o.final_lr_fraction = 0.1;
  const TrainRun f32 = test::train(o, core::DeviceMesh::parse("sp=2"));
  const TrainRun b16 = test::train(in_precision(o, nn::Precision::BF16), core::DeviceMesh::parse("sp=2"));
  // Mean losses over windows of 20 steps: single steps are noisy (a new batch each step), and
  // bf16's rounding changes which steps are noisy; what must agree is the curve.
  double worst = 0;
  for (int w = 0; w < 10; ++w) {
    double a = 0, b = 0;
    for (int i = 20 * w; i < 20 * (w + 1); ++i) a += f32.losses[i] / 20, b += b16.losses[i] / 20;
    const double band = 0.1 * a + 0.02;  // 10% of the fp32 loss plus 0.02 (near zero loss)
    std::printf("steps %3d-%3d: mean loss fp32 %.4f bf16 %.4f (band ±%.4f)\n", 20 * w + 1, 20 * w + 20, a, b, band);
    INFO("window " << w << ": fp32 " << a << ", bf16 " << b);
    REQUIRE(std::abs(a - b) <= band);
    worst = std::max(worst, std::abs(a - b) / band);
  }
  std::printf("bf16 vs fp32 over 200 steps: worst window at %.2f of its band\n", worst);
  // Both learned: the final window well below the first.
  double first = 0, last = 0;
  for (int i = 0; i < 20; ++i) first += b16.losses[i] / 20, last += b16.losses[180 + i] / 20;
  REQUIRE(last < 0.5 * first);
}

TEST_CASE("fp16 dynamic loss scaling: an overflow skips the step on every rank and lowers the scale",
          "[nn][train][precision]") {
  nn::TrainOptions o = in_precision(options(small_convnext(), "adamw"), nn::Precision::FP16);
  o.steps = 3;
  o.loss_scale.init = std::ldexp(1.0, 40);  // dlogits overflow fp16's 65504 at once: an injected overflow
  o.loss_scale.growth_interval = 1;
  nn::TrainOptions none = o;
  none.steps = 0;
  const TrainRun init = test::train(none, core::DeviceMesh::parse("sp=2"));
  const TrainRun r = test::train(o, core::DeviceMesh::parse("dp=2,sp=2"));
  REQUIRE(r.replicas_agree);
  REQUIRE(r.skips_agree);  // every rank skipped the same steps
  for (int s = 0; s < o.steps; ++s) {
    std::printf("fp16, scale 2^40 at the start: step %d scale %g %s\n", s, r.loss_scales[s],
                r.skipped[s] ? "skipped" : "applied");
    REQUIRE(r.skipped[s]);
    REQUIRE(r.loss_scales[s] == std::ldexp(1.0, 40 - s));  // backed off by 2 after each overflow
    REQUIRE(std::isfinite(r.losses[s]));
  }
  // Nothing was applied: the parameters are the initial ones, bit for bit.
  REQUIRE(r.params == init.params);
}

TEST_CASE("fp16 dynamic loss scaling recovers: after the skipped steps training proceeds and the scale grows",
          "[nn][train][precision]") {
  nn::TrainOptions o = in_precision(options(small_convnext(), "adamw"), nn::Precision::FP16);
  o.steps = 8;
  o.loss_scale.init = std::ldexp(1.0, 20);
  o.loss_scale.growth_interval = 3;
  const TrainRun r = test::train(o, core::DeviceMesh::parse("sp=2"));
  REQUIRE(r.skips_agree);
  int skipped = 0, first_applied = -1;
  for (int s = 0; s < o.steps; ++s) {
    std::printf("fp16, scale 2^20 at the start: step %d scale %g %s loss %.4f\n", s, r.loss_scales[s],
                r.skipped[s] ? "skipped" : "applied", r.losses[s]);
    if (r.skipped[s]) ++skipped;
    else if (first_applied < 0) first_applied = s;
  }
  REQUIRE(skipped >= 1);
  REQUIRE(first_applied >= 1);
  REQUIRE(first_applied + 3 < o.steps);
  // Three clean steps in a row double the scale.
  REQUIRE(r.loss_scales[first_applied + 3] == 2 * r.loss_scales[first_applied]);
}

TEST_CASE("fp16 without loss scaling loses small gradients to underflow; scaling keeps them", "[nn][train][precision]") {
  // Segmentation over many pixels: the per-pixel loss gradient is 1/(N·H·W) of a softmax
  // difference, ~1e-5 here, below fp16's smallest normal (6.1e-5): stored in fp16 it keeps a few
  // bits or none, and what backward makes of it shrinks further.
  nn::TrainOptions o = options(small_convnext(), "adamw");
  o.model.task = nn::Task::Segment;
  o.input = {3, 64, 256};
  o.steps = 1;
  const TrainRun f32 = test::train(o, core::DeviceMesh::parse("sp=2"));
  nn::TrainOptions h = in_precision(o, nn::Precision::FP16);
  const TrainRun scaled = test::train(h, core::DeviceMesh::parse("sp=2"));  // auto: dynamic, 2^16
  h.loss_scale.mode = nn::LossScaleOptions::Mode::Off;
  const TrainRun unscaled = test::train(h, core::DeviceMesh::parse("sp=2"));
  const double g = f32.grad_norms[0];
  const double e_scaled = std::abs(scaled.grad_norms[0] - g) / g, e_off = std::abs(unscaled.grad_norms[0] - g) / g;
  std::printf("fp16 gradient norm vs fp32 %.6g: loss scale 2^16 %.6g (%.2f%% off), no scaling %.6g (%.2f%% off)\n", g,
              scaled.grad_norms[0], 100 * e_scaled, unscaled.grad_norms[0], 100 * e_off);
  REQUIRE(scaled.loss_scales[0] == 65536.0);
  REQUIRE(unscaled.loss_scales[0] == 1.0);
  REQUIRE(e_scaled < 0.02);
  REQUIRE(e_off > 10 * e_scaled);
}

TEST_CASE("bf16 activations take at most 0.55x the booked bytes of fp32 ones", "[nn][train][precision][memory]") {
  nn::TrainOptions o;
  o.model.name = "memory-convnext";
  o.model.family = "convnext";
  o.model.depths = {2, 2, 2, 2};
  o.model.widths = {16, 32, 48, 64};
  o.model.num_classes = 4;
  o.input = {3, 64, 512};
  o.batch = 2;
  o.steps = 1;
  for (const char* mesh : {"sp=1", "sp=2"}) {
    const core::DeviceMesh m = core::DeviceMesh::parse(mesh);
    const TrainRun f = test::train(o, m);
    for (nn::Precision p : {nn::Precision::BF16, nn::Precision::FP16}) {
      const TrainRun h = test::train(in_precision(o, p), m);
      std::size_t fa = 0, ha = 0, fh = 0, hh = 0, fg = 0, hg = 0;
      for (const auto& s : f.memory) {
        fa = std::max(fa, s.peak_of(MemCategory::Activation));
        fh = std::max(fh, s.peak_of(MemCategory::HaloBuffer));
        fg = std::max(fg, s.peak_of(MemCategory::Gradient));
      }
      for (const auto& s : h.memory) {
        ha = std::max(ha, s.peak_of(MemCategory::Activation));
        hh = std::max(hh, s.peak_of(MemCategory::HaloBuffer));
        hg = std::max(hg, s.peak_of(MemCategory::Gradient));
      }
      std::printf("%s %s: peak activation %zu vs fp32 %zu (%.3fx), halo buffers %zu vs %zu, gradients %zu vs %zu\n",
                  mesh, std::string(nn::precision_name(p)).c_str(), ha, fa, double(ha) / double(fa), hh, fh, hg, fg);
      REQUIRE(double(ha) <= 0.55 * double(fa));
      REQUIRE(double(hh) <= 0.5 * double(fh));
      REQUIRE(hg == fg);  // gradients stay f32 (master weights)
    }
  }
}
