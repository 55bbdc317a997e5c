// The float32 equivalence rule (see train_equivalence.hpp for the rule and why).
#include "nn/train_equivalence.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace tessera::test {

namespace {

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const double d = std::abs(a[k] - b[k]);
    m = std::isnan(d) ? INFINITY : std::max(m, d);
  }
  return m;
}

double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double v : a) m = std::max(m, std::abs(v));
  return m;
}

/// The spacing of float32 numbers at magnitude |x|.
double ulp32(double x) {
  const float f = static_cast<float>(std::abs(x));
  return double(std::nextafter(f, INFINITY)) - double(f);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Judge {
  Fp32Verdict v;
  std::ostringstream os;
  void check(const std::string& where, double dist, double allowed, const std::string& detail) {
    const double ratio = allowed > 0 ? dist / allowed : (dist > 0 ? INFINITY : 0.0);
    if (!(ratio <= v.worst)) {
      v.worst = std::isnan(ratio) ? INFINITY : ratio;
      v.worst_at = where;
    }
    if (!(dist <= allowed)) {
      v.ok = false;
      os << where << ": " << dist << " from float64, allowed " << allowed << " (" << detail << ")\n";
    }
  }
};

// `target` is what the run is compared with (the float64 run, or for the 16-bit rule the one-rank
// run of the same precision); the allowance comes from one32's distance to one64.
void check_series(Judge& j, const char* what, const std::vector<double>& run, const std::vector<double>& one32,
                  const std::vector<double>& one64, double factor, const std::vector<double>* target = nullptr) {
  const std::vector<double>& to = target ? *target : one64;
  if (run.size() != one64.size() || one32.size() != one64.size() || to.size() != one64.size()) {
    j.v.ok = false;
    j.os << what << ": " << run.size() << " steps, the references " << one32.size() << " and " << one64.size() << "\n";
    return;
  }
  double nu = 0;  // float32's relative distance so far
  for (std::size_t t = 0; t < one64.size(); ++t) {
    const double x = one64[t];
    if (x != 0) nu = std::max(nu, std::abs(one32[t] - x) / std::abs(x));
    const double allowed = factor * nu * std::abs(x) + 2 * ulp32(x);
    std::ostringstream where, detail;
    where << what << " of step " << t;
    detail << "float32 one rank " << std::abs(one32[t] - x) << ", its relative distance so far " << nu;
    j.check(where.str(), std::abs(run[t] - to[t]), allowed, detail.str());
  }
}

}  // namespace

Fp32References fp32_references(const nn::TrainOptions& o) {
  const core::DeviceMesh one({1}, {"sp"});
  Fp32References r;
  nn::TrainOptions o64 = o;
  o64.dtype = core::DType::F64;
  // The exact answer of a mixed-precision run too: float64 throughout, no loss scaling.
  o64.precision = nn::Precision::FP32;
  o64.grad_reduce = nn::Precision::FP32;
  o64.loss_scale.mode = nn::LossScaleOptions::Mode::Off;
  nn::TrainOptions o0 = o64;
  o0.steps = 0;
  r.init = train(o0, one);
  r.one32 = train(o, one);
  r.one64 = train(o64, one);
  return r;
}

Fp32Verdict fp32_verdict(const TrainRun& run, const Fp32References& refs, double factor) {
  return rule_verdict(run, refs, factor, nullptr);
}

HalfReferences half_references(const nn::TrainOptions& o) {
  nn::TrainOptions o32 = o;
  o32.precision = nn::Precision::FP32;
  o32.grad_reduce = nn::Precision::FP32;
  o32.loss_scale.mode = nn::LossScaleOptions::Mode::Off;
  HalfReferences r;
  r.f32 = fp32_references(o32);
  r.one16 = train(o, core::DeviceMesh({1}, {"sp"}));
  return r;
}

Fp32Verdict half_verdict(const TrainRun& run, const HalfReferences& refs, double factor) {
  return rule_verdict(run, refs.f32, factor, &refs.one16);
}

Fp32Verdict rule_verdict(const TrainRun& run, const Fp32References& refs, double factor, const TrainRun* target) {
  Judge j;
  const std::size_t n = refs.one64.params.size();
  if (run.params.size() != n || refs.one32.params.size() != n || refs.init.params.size() != n) {
    j.v.ok = false;
    j.v.report = "the runs have different parameter lists";
    return j.v;
  }
  std::vector<double> s(n), e(n), rel;
  for (std::size_t i = 0; i < n; ++i) {
    s[i] = max_abs_diff(refs.one64.params[i], refs.init.params[i]);
    e[i] = max_abs_diff(refs.one32.params[i], refs.one64.params[i]);
    if (s[i] > 0) rel.push_back(e[i] / s[i]);
  }
  const double nu = median(rel);
  for (std::size_t i = 0; i < n; ++i) {
    const double allowed = factor * std::max(e[i], nu * s[i]) + 2 * ulp32(max_abs(refs.one64.params[i]));
    std::ostringstream where, detail;
    where << "parameter " << refs.one64.names[i];
    detail << "float32 one rank " << e[i] << ", trained by " << s[i] << ", typical relative distance " << nu;
    if (run.params[i].size() != refs.one64.params[i].size()) {
      j.v.ok = false;
      j.os << where.str() << ": " << run.params[i].size() << " elements, the reference " << refs.one64.params[i].size() << "\n";
      continue;
    }
    const std::vector<double>& to = target ? target->params[i] : refs.one64.params[i];
    j.check(where.str(), max_abs_diff(run.params[i], to), allowed, detail.str());
  }
  check_series(j, "loss", run.losses, refs.one32.losses, refs.one64.losses, factor, target ? &target->losses : nullptr);
  check_series(j, "gradient norm", run.grad_norms, refs.one32.grad_norms, refs.one64.grad_norms, factor,
               target ? &target->grad_norms : nullptr);
  j.v.report = j.os.str();
  return j.v;
}

}  // namespace tessera::test
