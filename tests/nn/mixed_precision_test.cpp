// Mixed-precision training (bf16, fp16 with f32 master weights): sharded runs equal the one-rank
// run by the 16-bit form of the float32 rule, bf16 training tracks fp32, fp16 loss scaling skips
// overflowing steps on every rank and prevents underflow, and 16-bit activations take half the
// booked bytes. The figures are printed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "tessera/core/half.hpp"
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

// Two checks hold a sharded bf16 (fp16) run to the one-rank run of its precision.
//
// The first step's gradients, sharply (one plain SGD step from the same initial weights): both runs compute every activation from the same inputs by the same
// arithmetic and round it to 16 bits; only f32 partial sums inside a kernel whose window is a
// shard are ordered differently, which moves a value by f32's rounding (2^-24) and rarely flips
// its 16-bit rounding (one unit u = 2^-8 bf16, 2^-11 fp16, in a fraction ~2^-24/u of the values).
// Every reduction that crosses ranks (SyncBN, the pool, the loss, the gradients) is f32 or f64.
// So each first-step gradient tensor agrees with the one-rank one within a few u of its scale
// (kGradientUnits below); a missing halo or a lost rank moves it by far more (the faults).
//
// The whole run, by the 16-bit form of the float32 rule (train_equivalence.hpp) with the one-rank
// run taken in the same precision: over ten AdamW steps the rare flips are amplified like any
// rounding difference (measured: a sharded run ends 1.5-7 times as far from float64 as the
// one-rank 16-bit run, the one-rank f32 run's own distance being 10^4-10^5 times smaller), so
// the sharded run must stay within kFp32Factor times the one-rank 16-bit run's distance from
// float64.
/// One plain SGD step (lr 1, no momentum, decay, clipping or warmup): each parameter's update is
/// its gradient.
nn::TrainOptions one_sgd_step(nn::TrainOptions o) {
  o.optimizer.kind = "sgd";
  o.optimizer.lr = 1;
  o.optimizer.momentum = 0;
  o.optimizer.weight_decay = 0;
  o.clip_norm = 0;
  o.warmup_steps = 0;
  o.steps = 1;
  return o;
}

/// The first step's gradients of `r` against those of the one-rank run `one` (both one_sgd_step
/// runs from `init`): the largest over parameter tensors of max |Δr − Δone| / max |Δone|.
double gradient_gap(const TrainRun& r, const TrainRun& one, const TrainRun& init, std::string& at) {
  double w = 0;
  for (std::size_t t = 0; t < init.params.size(); ++t) {
    double d = 0, m = 0;
    for (std::size_t k = 0; k < init.params[t].size(); ++k) {
      const double a = r.params[t][k] - init.params[t][k], b = one.params[t][k] - init.params[t][k];
      d = std::max(d, std::abs(a - b));
      m = std::max(m, std::abs(b));
    }
    if (m > 0 && !(d / m <= w)) w = d / m, at = init.names[t];
  }
  return w;
}

/// The first-step references of options `o`: the initial parameters and the one-rank gradients.
struct FirstStep {
  nn::TrainOptions o;
  TrainRun init, one;
};
FirstStep first_step(const nn::TrainOptions& o) {
  FirstStep f{one_sgd_step(o), {}, {}};
  nn::TrainOptions none = f.o;
  none.steps = 0;
  f.init = test::train(none, core::DeviceMesh({1}, {"sp"}));
  f.one = test::train(f.o, core::DeviceMesh({1}, {"sp"}));
  return f;
}

// The first step's gradients within kGradientUnits units of 16-bit rounding (u) of each tensor's
// scale, and the whole run by the 16-bit rule. Measured on AMD EPYC Zen 3 (2026-12-01), the
// largest gap over the tensors: ConvNeXt 0.9-1.5 u in bf16, 2.5 u in fp16 (LayerScale's gamma:
// a product of two 16-bit tensors summed over every pixel), RegNetY 5.3 u (BatchNorm's weight:
// its gradient Σ dy·x̂ amplifies a flipped x by the batch's 1/std); the broken runs 23-337 u.
constexpr double kGradientUnits = 8;

void check_run(const core::DeviceMesh& mesh, const nn::TrainOptions& o, const FirstStep& f,
               const test::Fp32References& refs, const std::string& what, double units = kGradientUnits) {
  const double u = core::unit_roundoff(nn::precision_dtype(o.precision, o.dtype));
  std::string at;
  const double gap = gradient_gap(test::train(f.o, mesh), f.one, f.init, at);
  const TrainRun r = test::train(o, mesh);
  const auto v = test::fp32_verdict(r, refs);
  std::printf("%s: first-step gradients %.2f u from the one-rank run's (at %s); whole run %.3f of the 16-bit "
              "allowance (at %s)\n", what.c_str(), gap / u, at.c_str(), v.worst, v.worst_at.c_str());
  INFO("first-step gradients " << gap / u << " u from the one-rank run's at " << at);
  REQUIRE(gap <= units * u);
  REQUIRE_FP32_EQUIVALENT(r, refs);
}

void check_grid(const nn::TrainOptions& o, const char* what) {
  const test::Fp32References refs = test::fp32_references(o);  // one32: the one-rank run in o's precision
  REQUIRE(refs.one32.losses.size() == std::size_t(o.steps));
  const FirstStep f = first_step(o);
  for (const char* mesh : {"sp=2", "sp=3", "sp=4", "dp=2,sp=2"}) {
    DYNAMIC_SECTION(what << " on " << mesh) {
      check_run(core::DeviceMesh::parse(mesh), o, f, refs, std::string(what) + " on " + mesh);
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
    // SyncBN and SE amplify a flipped rounding (BatchNorm's weight gradient by the batch's 1/std):
    // measured 5.3 u with -march=native, 10.7 u in the sanitizer build; the bound is 32 u.
    check_run(core::DeviceMesh::parse(mesh), o, first_step(o), refs, std::string("bf16 RegNetY on ") + mesh, 32);
  }
}

TEST_CASE("sharded bf16 2-D tiles, along H and with 16-bit gradient reduction equal the one-rank run",
          "[nn][train][precision]") {
  nn::TrainOptions o = in_precision(options(small_convnext(), "adamw"), nn::Precision::BF16);
  o.input = {3, 64, 96};
  o.steps = 4;
  o.optimizer.lr = 1e-3;
  const test::Fp32References refs = test::fp32_references(o);
  SECTION("sp_h=2 x sp_w=2") {
    check_run(core::DeviceMesh::parse("sp_h=2,sp_w=2"), o, first_step(o), refs, "bf16 sp_h=2 x sp_w=2");
  }
  SECTION("sp=2 along H") {
    nn::TrainOptions h = o;
    h.shard = "H";
    check_run(core::DeviceMesh::parse("sp=2"), h, first_step(h), test::fp32_references(h), "bf16 sp=2 along H");
  }
  SECTION("bf16 gradient all-reduce, dp=2 x sp=2") {
    // Buckets rounded to bf16 before the reduction: one more bf16 rounding of every gradient (a
    // relative 2^-8) that the one-rank run does not make, so this run is held to the looser
    // form of the rule, against float64 (train_equivalence.hpp): within kFp32Factor times the
    // one-rank bf16 run's own distance from it.
    nn::TrainOptions g = o;
    g.grad_reduce = nn::Precision::BF16;
    REQUIRE_FP32_EQUIVALENT(test::train(g, core::DeviceMesh::parse("dp=2,sp=2")), refs);
  }
}

TEST_CASE("the 16-bit rule fails deliberately broken bf16 runs", "[nn][train][precision]") {
  const nn::TrainOptions o = in_precision(options(small_convnext(), "adamw"), nn::Precision::BF16);
  const test::Fp32References refs = test::fp32_references(o);
  const FirstStep fs = first_step(o);
  const double u = 1.0 / 256;
  for (test::Fault f : {test::Fault::HaloZero, test::Fault::HaloBackwardZero, test::Fault::GradMissingRank}) {
    const core::DeviceMesh mesh = core::DeviceMesh::parse("sp=3");
    std::string at;
    const TrainRun first = test::train(fs.o, mesh, {}, {}, f);
    const double gap = gradient_gap(first, fs.one, fs.init, at);
    const TrainRun r = test::train(o, mesh, {}, {}, f);
    const auto v = test::fp32_verdict(r, refs);
    std::printf("bf16 ConvNeXt on sp=3 with %s: first-step gradients %.1f u from the one-rank run's (at %s); whole "
                "run %.1f times the 16-bit allowance\n", test::fault_name(f), gap / u, at.c_str(), v.worst);
    INFO(test::fault_name(f) << ": first step " << gap / u << " u at " << at << ", whole run " << v.worst);
    REQUIRE(first.faults_injected > 0);
    // The first-step check fails: a bug is not 16-bit rounding.
    REQUIRE(gap > 2 * kGradientUnits * u);
  }
}

TEST_CASE("bf16 training tracks fp32: the loss curve stays in a band over 200 steps", "[nn][train][precision][long]") {
  // The learnability setting of training_test.cpp, twice as long, on one rank and on sp=2 in bf16.
  const nn::TrainOptions o = test::learnability_options(200);
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
  o.steps = 12;
  o.loss_scale.init = std::ldexp(1.0, 23);  // overflows the 16-bit activation gradients (here above 2^20)
  o.loss_scale.growth_interval = 3;
  const TrainRun r = test::train(o, core::DeviceMesh::parse("sp=2"));
  REQUIRE(r.skips_agree);
  int skipped = 0, first_applied = -1;
  for (int s = 0; s < o.steps; ++s) {
    std::printf("fp16, scale 2^23 at the start: step %d scale %g %s loss %.4f\n", s, r.loss_scales[s],
                r.skipped[s] ? "skipped" : "applied", r.losses[s]);
    if (r.skipped[s]) ++skipped;
    else if (first_applied < 0) first_applied = s;
  }
  REQUIRE(skipped >= 1);
  REQUIRE(first_applied >= 1);
  REQUIRE(first_applied + 3 < o.steps);
  // Each overflow halved the scale; three clean steps in a row (from the first applied one, right
  // after an overflow) double it.
  for (int s = 1; s <= first_applied; ++s) REQUIRE(r.loss_scales[s] == r.loss_scales[s - 1] / 2);
  REQUIRE_FALSE(r.skipped[first_applied + 1]);
  REQUIRE_FALSE(r.skipped[first_applied + 2]);
  REQUIRE(r.loss_scales[first_applied + 3] == 2 * r.loss_scales[first_applied]);
}

TEST_CASE("fp16 without loss scaling loses small gradients to underflow, scaling keeps them", "[nn][train][precision]") {
  // Segmentation over many pixels: the per-pixel loss gradient is 1/(N·H·W) of a softmax
  // difference, ~3e-5 here, below fp16's smallest normal (6.1e-5): stored in fp16 it keeps a few
  // bits or none, and backward makes it smaller still on its way to the stem. One plain SGD step
  // (lr 1, no momentum, decay or clipping) makes each parameter's update its gradient.
  nn::TrainOptions o = one_sgd_step(options(small_convnext(), "sgd"));
  o.model.task = nn::Task::Segment;
  o.model.drop_path = 0;
  o.input = {3, 64, 256};
  const core::DeviceMesh mesh = core::DeviceMesh::parse("sp=2");
  nn::TrainOptions none = o;
  none.steps = 0;
  const TrainRun init = test::train(none, mesh);
  const TrainRun f32 = test::train(o, mesh);
  nn::TrainOptions h = in_precision(o, nn::Precision::FP16);
  const TrainRun scaled = test::train(h, mesh);  // auto: dynamic, 2^16
  h.loss_scale.mode = nn::LossScaleOptions::Mode::Off;
  const TrainRun unscaled = test::train(h, mesh);
  REQUIRE(scaled.loss_scales[0] == 65536.0);
  REQUIRE(unscaled.loss_scales[0] == 1.0);
  std::string at_scaled, at_off;
  const double e_scaled = gradient_gap(scaled, f32, init, at_scaled), e_off = gradient_gap(unscaled, f32, init, at_off);
  std::printf("fp16 gradients vs fp32 (worst tensor, relative): loss scale 2^16 %.4f (%s), no scaling %.4f (%s)\n",
              e_scaled, at_scaled.c_str(), e_off, at_off.c_str());
  REQUIRE(e_scaled < 0.05);
  REQUIRE(e_off > 4 * e_scaled);
}

TEST_CASE("bf16 activations take at most 0.55x the booked bytes of fp32 ones", "[nn][train][precision][memory]") {
  nn::TrainOptions o = test::memory_options("none");
  // The model's activations: without the loader's prefetch slots, whose images stay f32 in any
  // precision (what a dataset hands); the batch is then cast and freed in the first step.
  o.loader.prefetch = 0;
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
