// Issue 37's targets as bench_train measures them (bench/README.md, "bench_train: bf16 and the
// libtorch forms"): tessera bf16 / fp32, and tessera against libtorch's best form in fp32 and in
// bf16 autocast, each a ratio of two named rows of the same run. Kept apart from train.cpp's
// measurements: these only pick rows and divide their medians.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace tessera::bench {

/// One timed row of the run: its name as the table prints it and its median step.
struct TimedRow {
  std::string name;
  double ms = 0;
};

/// numerator / denominator of two rows' medians, with the issue's target for it.
struct TargetRatio {
  std::string key;                     ///< the JSON field: "bf16_over_fp32", ...
  std::string numerator, denominator;  ///< the rows' names ("" where the row is missing)
  std::optional<double> value;         ///< absent: why_not says why
  std::string target;                  ///< "<= 0.55", ">= 1.3"
  std::string why_not;
  std::string note;  ///< where the target applies, when not everywhere
};

/// The fastest of `rows` by median (libtorch's best form), or nullopt for none.
inline std::optional<TimedRow> fastest(const std::vector<TimedRow>& rows) {
  std::optional<TimedRow> best;
  for (const TimedRow& r : rows)
    if (!best || r.ms < best->ms) best = r;
  return best;
}

/// num / den, or no value with `why_not` (the missing row's reason, or `refused` when set).
inline TargetRatio row_ratio(const std::string& key, const std::string& target,
                             const std::optional<TimedRow>& num, const std::optional<TimedRow>& den,
                             const std::string& missing, const std::string& refused = "") {
  TargetRatio t{key, num ? num->name : "", den ? den->name : "", std::nullopt, target, "", ""};
  if (!refused.empty())
    t.why_not = refused;
  else if (!num || !den || !(den->ms > 0))
    t.why_not = missing;
  else
    t.value = num->ms / den->ms;
  return t;
}

/// Whether `v` meets a target written "<= x" or ">= x".
inline bool target_met(const std::string& target, double v) {
  const double x = std::stod(target.substr(3));
  return target.rfind("<=", 0) == 0 ? v <= x : v >= x;
}

/// Rows of one run: tessera's P=1 rows and libtorch's forms in each precision.
struct TargetRows {
  std::optional<TimedRow> tessera_fp32, tessera_bf16;
  std::vector<TimedRow> torch_fp32, torch_bf16;  ///< NCHW and channels-last, as measured
  std::string torch_refused;  ///< why no ratio against libtorch may be given ("" when it may)
  bool amx = false;           ///< tessera's oneDNN ISA has AMX (where the bf16/fp32 target holds)
};

/// The three ratios of issue 37, in order: bf16_over_fp32 (target <= 0.55 on AMX machines),
/// bf16_speedup_vs_torch_autocast and fp32_speedup_vs_torch_best (libtorch's faster form over
/// tessera's step: target >= 1.3 each).
inline std::vector<TargetRatio> issue37_ratios(const TargetRows& r) {
  const std::string no_torch =
      "libtorch was not measured (--no-torch, another backend, or a build "
      "without libtorch)";
  std::vector<TargetRatio> v;
  v.push_back(row_ratio("bf16_over_fp32", "<= 0.55", r.tessera_bf16, r.tessera_fp32,
                        "needs tessera's fp32 and bf16 rows at P=1 without checkpointing "
                        "(--ranks 1 --checkpointing none --precision bf16)"));
  v.back().note = r.amx ? "AMX machine: the target applies"
                        : "the target is for AMX machines; this CPU's oneDNN ISA has no AMX";
  const bool torch = !r.torch_fp32.empty();
  v.push_back(row_ratio("bf16_speedup_vs_torch_autocast", ">= 1.3", fastest(r.torch_bf16),
                        r.tessera_bf16,
                        torch ? "needs tessera's bf16 row at P=1 without checkpointing and "
                                "libtorch's bf16 autocast rows (--precision bf16)"
                              : no_torch,
                        r.torch_refused));
  v.push_back(row_ratio(
      "fp32_speedup_vs_torch_best", ">= 1.3", fastest(r.torch_fp32), r.tessera_fp32,
      torch ? "needs tessera's fp32 row at P=1 without checkpointing" : no_torch, r.torch_refused));
  return v;
}

/// One ratio as a JSON object: value (null without one), of / over (the rows it divides),
/// target, met, why_not, note.
inline std::string target_json(const TargetRatio& t) {
  Json j;
  if (t.value)
    j.num("value", *t.value);
  else
    j.raw("value", "null");
  j.str("of", t.numerator).str("over", t.denominator).str("target", t.target);
  j.raw("met", t.value ? (target_met(t.target, *t.value) ? "true" : "false") : "null");
  j.raw("why_not", t.why_not.empty() ? "null" : json_quote(t.why_not));
  if (!t.note.empty()) j.str("note", t.note);
  return j.str();
}

/// One ratio as a line of the table.
inline void print_target(const TargetRatio& t) {
  if (!t.value) {
    std::printf("  %s: none (%s)\n", t.key.c_str(), t.why_not.c_str());
    return;
  }
  std::printf("  %s = %s / %s = %.2f (target %s: %s%s%s)\n", t.key.c_str(), t.numerator.c_str(),
              t.denominator.c_str(), *t.value, t.target.c_str(),
              target_met(t.target, *t.value) ? "met" : "not met", t.note.empty() ? "" : "; ",
              t.note.c_str());
}

}  // namespace tessera::bench
