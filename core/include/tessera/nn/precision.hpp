// Mixed precision: the precision a run computes in (fp32, bf16, fp16), the AMP policy that goes
// with it (f32 master weights, 16-bit activations, fp32 accumulation; docs/training.md, "Mixed
// precision") and the dynamic loss scaler that keeps fp16 gradients from underflowing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tessera/core/dtype.hpp"

namespace tessera::nn {

/// What the layers compute and store activations in. FP32 is the full precision of the run's
/// dtype (TrainOptions::dtype, f32 or f64); BF16 and FP16 store activations, saved tensors and
/// halos in 16 bits while parameters, gradients and optimizer state stay f32.
enum class Precision : std::uint8_t { FP32, BF16, FP16 };

/// "fp32", "bf16", "fp16".
std::string_view precision_name(Precision p) noexcept;
/// The precision spelled `name` ("fp32", "bf16", "fp16"; also "f32", "f16"), or nullopt.
std::optional<Precision> parse_precision(std::string_view name);
/// The activation dtype of precision p in a run whose parameters are `master`: master for FP32,
/// BF16 or F16 otherwise.
core::DType precision_dtype(Precision p, core::DType master) noexcept;

/// Loss scaling (fp16's defence against underflowing gradients): the loss gradient is multiplied
/// by `scale` before backward and the gradients divided by it before the optimizer.
struct LossScaleOptions {
  enum class Mode : std::uint8_t {
    Auto,     ///< dynamic for fp16, off for fp32 and bf16 (bf16 has f32's exponent range)
    Dynamic,  ///< grow after growth_interval clean steps; on an overflow skip the step and back off
    Static,   ///< a fixed scale; an overflow stops the run like any non-finite gradient
    Off,      ///< scale 1
  };
  Mode mode = Mode::Auto;
  double init = 65536.0;  ///< the first scale (dynamic) or the scale (static); 2^16 as PyTorch's GradScaler
  int growth_interval = 2000;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  /// A dynamic scale that would fall below this after an overflow stops the run instead (the
  /// gradients overflow whatever the scale: the run diverged).
  double min_scale = 1.0 / 65536.0;

  bool operator==(const LossScaleOptions&) const = default;
};

/// The text form front ends take: "auto", "dynamic", "off", or a number (a static scale, > 0).
/// Throws InvalidArgument naming the text for anything else.
LossScaleOptions parse_loss_scale(std::string_view text);
/// "auto", "dynamic", "off" or the static scale.
std::string loss_scale_text(const LossScaleOptions& o);

/// The loss scale of one rank's run. Every rank feeds it the same replicated decision (whether the
/// reduced gradients are finite), so every rank holds the same scale and skips the same steps.
class LossScaler {
 public:
  LossScaler(const LossScaleOptions& options, Precision precision);

  /// Whether gradients are scaled at all (false: scale() is 1 and update() always applies).
  bool enabled() const noexcept { return mode_ != LossScaleOptions::Mode::Off; }
  bool dynamic() const noexcept { return mode_ == LossScaleOptions::Mode::Dynamic; }
  /// The factor the loss gradient is multiplied by this step.
  double scale() const noexcept { return scale_; }
  /// After backward: `finite` says whether the (unscaled, reduced) gradients are all finite.
  /// Returns true when the optimizer step is to be applied. A dynamic scaler skips a non-finite
  /// step and backs off (returns false); it grows the scale after growth_interval clean steps in a
  /// row. Throws nothing: a static or disabled scaler returns `finite` and the caller stops the run.
  bool update(bool finite);
  /// Whether the scale that update() would back off to is below min_scale (the caller stops).
  bool at_floor() const noexcept;
  /// Steps skipped so far (a dynamic scaler's overflows).
  std::int64_t skipped() const noexcept { return skipped_; }
  /// Clean steps since the last growth or overflow.
  int good_steps() const noexcept { return good_; }
  /// Restores what a checkpoint saved (scale, good steps, skipped steps).
  void restore(double scale, int good_steps, std::int64_t skipped);

 private:
  LossScaleOptions o_;
  LossScaleOptions::Mode mode_;
  double scale_ = 1.0;
  int good_ = 0;
  std::int64_t skipped_ = 0;
};

}  // namespace tessera::nn
