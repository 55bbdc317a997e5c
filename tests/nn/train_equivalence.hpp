// The float32 equivalence rule of the training tests. A float32 run (sharded, checkpointed, ...)
// passes when, for every parameter tensor and every step's loss and gradient norm, it is within
// kFp32Factor times as far from the float64 one-rank run as the float32 one-rank run itself is.
//
// Why: the float64 one-rank run is the exact answer (to ~1e-12: the float64 tests prove the
// sharded runs equal it to 1e-9). The float32 one-rank run's distance from it is what float32
// rounding does to *this* model, input, optimizer and CPU — through FMA contraction or not, the
// vector width, the summation orders, and the amplification of SyncBN and many SGD steps. A
// sharded float32 run rounds differently (other partial sums, other reduction orders) but by the
// same arithmetic, so its distance is of the same size: measured 0.0–1.5x the one-rank distance
// for most tensors, up to ~6x on a few tiny ones (tests/nn/training_test.cpp's comments give
// the figures per build). A bug does not scale with float32's rounding: a missing halo, a
// SyncBN reduction that leaves a rank out, or a gradient reduced wrongly moves parameters by a
// sizeable fraction of what training moved them — hundreds to millions of times the allowance
// (training_test.cpp's fault tests show each one failing the rule).
//
// Per parameter tensor i (values at the end of the run):
//   s_i = max |one64 − init|            what training moved the tensor
//   e_i = max |one32 − one64|           float32's own distance on this tensor
//   ν   = median over tensors of e_i/s_i   the run's typical relative distance (a floor for
//                                          tensors whose own e_i is by chance tiny)
//   allowed_i = kFp32Factor · max(e_i, ν·s_i) + 2 ulp(max |one64_i|)
// and max |run − one64| ≤ allowed_i. For the loss and gradient norm of step t, with x_t the
// float64 value: the float32 run's relative distance so far, ν_t = max over t' ≤ t of
// |one32_t' − one64_t'| / |one64_t'| (rounding differences accumulate, they do not vanish), and
// |run_t − one64_t| ≤ kFp32Factor · ν_t · |x_t| + 2 ulp(x_t).
#pragma once

#include <string>

#include "nn/train_harness.hpp"

namespace tessera::test {

/// The runs the rule measures against: the initial parameters and the one-rank run in float32
/// and in float64, all with the same options.
struct Fp32References {
  TrainRun init, one32, one64;
};
Fp32References fp32_references(const nn::TrainOptions& o);

/// The rule's verdict on one run.
struct Fp32Verdict {
  bool ok = true;
  double worst = 0;      ///< max over tensors and steps of distance / allowed (≤ 1 passes)
  std::string worst_at;  ///< where `worst` was found
  std::string report;    ///< one line per failing tensor or step, else empty
};
Fp32Verdict fp32_verdict(const TrainRun& run, const Fp32References& refs, double factor = kFp32Factor);

/// The 16-bit rule (mixed precision, tests/nn/mixed_precision_test.cpp says why): a sharded bf16 or
/// fp16 run is compared with the one-rank run of the same precision — both round the same values to
/// 16 bits, they differ only where an f32 partial sum ordered differently flips a rounding — and
/// may differ from it by `factor` times float32's own distance (the float32 rule's allowance).
struct HalfReferences {
  TrainRun one16;      ///< the one-rank run in the options' precision
  Fp32References f32;  ///< the float32 rule's references for the same options in fp32
};
HalfReferences half_references(const nn::TrainOptions& o);
Fp32Verdict half_verdict(const TrainRun& run, const HalfReferences& refs, double factor);
/// The rule's verdict against `target` (null: the float64 one-rank run of refs).
Fp32Verdict rule_verdict(const TrainRun& run, const Fp32References& refs, double factor, const TrainRun* target);

}  // namespace tessera::test

/// REQUIRE that `run` satisfies the float32 equivalence rule against `refs` (and that every
/// rank ends with the same parameters).
#define REQUIRE_FP32_EQUIVALENT(run, refs)                                                       \
  do {                                                                                           \
    const auto tessera_v_ = ::tessera::test::fp32_verdict((run), (refs));                        \
    INFO("worst: " << tessera_v_.worst << " of the allowance at " << tessera_v_.worst_at << "\n" \
                   << tessera_v_.report);                                                        \
    REQUIRE((run).replicas_agree);                                                               \
    REQUIRE(tessera_v_.ok);                                                                      \
  } while (0)
