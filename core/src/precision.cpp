// Precision names and the dynamic loss scaler (docs/training.md, "Mixed precision").
#include "tessera/nn/precision.hpp"

#include <cmath>
#include <sstream>

#include "tessera/core/error.hpp"

namespace tessera::nn {

std::string_view precision_name(Precision p) noexcept {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::BF16: return "bf16";
    case Precision::FP16: return "fp16";
  }
  return "?";
}

std::optional<Precision> parse_precision(std::string_view n) {
  if (n == "fp32" || n == "f32") return Precision::FP32;
  if (n == "bf16") return Precision::BF16;
  if (n == "fp16" || n == "f16") return Precision::FP16;
  return std::nullopt;
}

core::DType precision_dtype(Precision p, core::DType master) noexcept {
  switch (p) {
    case Precision::FP32: return master;
    case Precision::BF16: return core::DType::BF16;
    case Precision::FP16: return core::DType::F16;
  }
  return master;
}

LossScaleOptions parse_loss_scale(std::string_view text) {
  LossScaleOptions o;
  if (text == "auto") return o;
  if (text == "dynamic") {
    o.mode = LossScaleOptions::Mode::Dynamic;
    return o;
  }
  if (text == "off" || text == "none") {
    o.mode = LossScaleOptions::Mode::Off;
    return o;
  }
  double v = 0;
  const std::string s(text);
  std::size_t used = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TESSERA_CHECK(used == s.size() && !s.empty() && std::isfinite(v) && v > 0, "loss scale '", s,
                "': expected auto (dynamic for fp16, off otherwise), dynamic, off, or a positive number (a static "
                "scale such as 1024)");
  o.mode = LossScaleOptions::Mode::Static;
  o.init = v;
  return o;
}

std::string loss_scale_text(const LossScaleOptions& o) {
  switch (o.mode) {
    case LossScaleOptions::Mode::Auto: return "auto";
    case LossScaleOptions::Mode::Dynamic: return "dynamic";
    case LossScaleOptions::Mode::Off: return "off";
    case LossScaleOptions::Mode::Static: break;
  }
  std::ostringstream os;
  os.precision(17);
  os << o.init;
  return os.str();
}

LossScaler::LossScaler(const LossScaleOptions& o, Precision p) : o_(o), mode_(o.mode) {
  if (mode_ == LossScaleOptions::Mode::Auto)
    mode_ = p == Precision::FP16 ? LossScaleOptions::Mode::Dynamic : LossScaleOptions::Mode::Off;
  if (mode_ != LossScaleOptions::Mode::Off) {
    TESSERA_CHECK(std::isfinite(o.init) && o.init > 0, "loss scale ", o.init, " must be a positive number");
    scale_ = o.init;
  }
  if (mode_ == LossScaleOptions::Mode::Dynamic)
    TESSERA_CHECK(o.growth_interval >= 1 && o.growth_factor > 1 && o.backoff_factor > 0 && o.backoff_factor < 1 &&
                      o.min_scale > 0,
                  "dynamic loss scaling needs growth_interval >= 1, growth_factor > 1, 0 < backoff_factor < 1 and "
                  "min_scale > 0; got ", o.growth_interval, ", ", o.growth_factor, ", ", o.backoff_factor, ", ",
                  o.min_scale);
}

bool LossScaler::at_floor() const noexcept { return dynamic() && scale_ * o_.backoff_factor < o_.min_scale; }

bool LossScaler::update(bool finite) {
  if (!dynamic()) return finite;
  if (!finite) {
    scale_ *= o_.backoff_factor;
    good_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_ >= o_.growth_interval) {
    // Growing past f32's range would make every later step overflow; stay put there.
    if (std::isfinite(scale_ * o_.growth_factor) && scale_ * o_.growth_factor < 3.0e38) scale_ *= o_.growth_factor;
    good_ = 0;
  }
  return true;
}

void LossScaler::restore(double scale, int good_steps, std::int64_t skipped) {
  TESSERA_CHECK(std::isfinite(scale) && scale > 0 && good_steps >= 0 && skipped >= 0, "loss scaler state: scale ",
                scale, ", good steps ", good_steps, ", skipped ", skipped, " is not a valid state");
  if (!enabled()) return;
  scale_ = scale;
  good_ = good_steps;
  skipped_ = skipped;
}

}  // namespace tessera::nn
