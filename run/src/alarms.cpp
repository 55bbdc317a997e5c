// Training alarms: the rules, their text form and the monitor that applies them to each step.
#include "tessera/run/alarms.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tessera::run {

namespace {

constexpr const char* kKindNames[kNumAlarmKinds] = {"grad_norm", "grad_variance", "loss", "step_time", "nonfinite"};

double median(std::deque<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void push(std::deque<double>& q, double x, int window) {
  q.push_back(x);
  while (static_cast<int>(q.size()) > window) q.pop_front();
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::optional<AlarmAction> parse_action(std::string_view s) {
  for (AlarmAction a : {AlarmAction::Warn, AlarmAction::Save, AlarmAction::Stop, AlarmAction::SaveStop})
    if (s == alarm_action_name(a)) return a;
  if (s == "stop+save") return AlarmAction::SaveStop;
  return std::nullopt;
}

std::string fmt(double x) {
  std::ostringstream os;
  os.precision(4);
  os << x;
  return os.str();
}

}  // namespace

std::string_view alarm_kind_name(AlarmKind k) noexcept {
  const auto i = static_cast<std::size_t>(k);
  return i < kNumAlarmKinds ? kKindNames[i] : "?";
}

std::string_view alarm_action_name(AlarmAction a) noexcept {
  switch (a) {
    case AlarmAction::Warn: return "warn";
    case AlarmAction::Save: return "save";
    case AlarmAction::Stop: return "stop";
    case AlarmAction::SaveStop: return "save+stop";
  }
  return "?";
}

bool AlarmOptions::any_saves() const noexcept {
  return std::any_of(rules.begin(), rules.end(), [](const AlarmRule& r) {
    return r.enabled() && (r.action == AlarmAction::Save || r.action == AlarmAction::SaveStop);
  });
}

AlarmOptions parse_alarms(std::string_view text) {
  AlarmOptions o;
  const std::string usage =
      "; write name=THRESHOLD[:ACTION] or name=off (names grad_norm, grad_variance, loss, step_time; actions "
      "warn, save, stop, save+stop), nonfinite=stop or nonfinite=save+stop, window=N, warmup=N, separated by commas";
  std::stringstream ss{std::string(text)};
  for (std::string item; std::getline(ss, item, ',');) {
    item = trim(item);
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    TESSERA_CHECK(eq != std::string::npos, "alarm entry '", item, "': no '='", usage);
    const std::string name = trim(std::string_view(item).substr(0, eq));
    const std::string value = trim(std::string_view(item).substr(eq + 1));
    auto integer = [&](int lo) {
      std::size_t used = 0;
      int n = 0;
      try {
        n = std::stoi(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      TESSERA_CHECK(used == value.size() && !value.empty() && n >= lo, "alarm entry '", item, "': ", name,
                    " must be an integer of at least ", lo);
      return n;
    };
    if (name == "window") {
      o.window = integer(2);
      continue;
    }
    if (name == "warmup") {
      o.warmup = integer(1);
      continue;
    }
    const auto* k = std::find(std::begin(kKindNames), std::end(kKindNames), name);
    TESSERA_CHECK(k != std::end(kKindNames), "alarm entry '", item, "': no alarm named '", name, "'", usage);
    const auto kind = static_cast<AlarmKind>(k - std::begin(kKindNames));
    AlarmRule& r = o.rule(kind);
    if (kind == AlarmKind::NonFinite) {
      // The trainer refuses a non-finite step whatever the alarm says: the run always stops.
      const std::optional<AlarmAction> a = parse_action(value);
      TESSERA_CHECK(a == AlarmAction::Stop || a == AlarmAction::SaveStop || a == AlarmAction::Save, "alarm '", item,
                    "': nonfinite takes stop or save+stop (a non-finite step cannot be applied, so the run always "
                    "stops; save+stop also saves the last good state)");
      r = {1, *a == AlarmAction::Save ? AlarmAction::SaveStop : *a};
      continue;
    }
    if (value == "off") {
      r.threshold = 0;
      continue;
    }
    const std::size_t colon = value.find(':');
    const std::string num = value.substr(0, colon);
    if (const std::optional<AlarmAction> a = parse_action(num); a && colon == std::string::npos) {
      TESSERA_CHECK(r.enabled(), "alarm entry '", item, "': ", name, " is off; give a threshold, e.g. ", name, "=4:", num);
      r.action = *a;
      continue;
    }
    double t = 0;
    std::size_t used = 0;
    try {
      t = std::stod(num, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    TESSERA_CHECK(used == num.size() && !num.empty() && std::isfinite(t) && t > 0, "alarm entry '", item, "': the threshold '",
                  num, "' must be a positive number (", name == "grad_variance" ? "a coefficient of variation" : "a factor over the median",
                  ")", usage);
    TESSERA_CHECK(name == "grad_variance" || t > 1, "alarm entry '", item, "': a threshold of ", num,
                  " would fire on ordinary steps; it multiplies the median of recent steps, so give more than 1");
    r.threshold = t;
    if (colon != std::string::npos) {
      const std::optional<AlarmAction> a = parse_action(value.substr(colon + 1));
      TESSERA_CHECK(a.has_value(), "alarm entry '", item, "': action '", value.substr(colon + 1), "'", usage);
      r.action = *a;
    }
  }
  TESSERA_CHECK(o.warmup <= o.window, "alarm warmup=", o.warmup, " is longer than window=", o.window,
                ": the median would never hold the warmup's steps; raise the window or lower the warmup");
  return o;
}

std::string alarms_text(const AlarmOptions& o) {
  std::ostringstream os;
  for (int k = 0; k < kNumAlarmKinds; ++k) {
    const AlarmRule& r = o.rules[std::size_t(k)];
    os << kKindNames[k] << "=";
    if (static_cast<AlarmKind>(k) == AlarmKind::NonFinite)
      os << alarm_action_name(r.action);
    else if (!r.enabled())
      os << "off";
    else
      os << r.threshold << ":" << alarm_action_name(r.action);
    os << ",";
  }
  os << "window=" << o.window << ",warmup=" << o.warmup;
  return os.str();
}

std::string alarm_json(const Alarm& a) {
  nlohmann::ordered_json j;
  j["alarm"] = alarm_kind_name(a.kind);
  j["step"] = a.step;
  j["value"] = std::isfinite(a.value) ? nlohmann::ordered_json(a.value) : nlohmann::ordered_json(nullptr);
  j["baseline"] = a.baseline;
  j["threshold"] = a.threshold;
  j["action"] = alarm_action_name(a.action);
  j["message"] = a.message;
  if (!a.checkpoint.empty()) j["checkpoint"] = a.checkpoint;
  return j.dump();
}

AlarmMonitor::AlarmMonitor(AlarmOptions options) : opt_(std::move(options)) {
  TESSERA_CHECK(opt_.window >= 2 && opt_.warmup >= 1 && opt_.warmup <= opt_.window, "alarms: window ", opt_.window,
                " and warmup ", opt_.warmup, " must satisfy 1 <= warmup <= window, window >= 2");
}

Alarm AlarmMonitor::make(AlarmKind k, std::int64_t step, double value, double baseline, std::string what) {
  Alarm a;
  a.kind = k;
  a.action = opt_.rule(k).action;
  a.step = step;
  a.value = value;
  a.baseline = baseline;
  a.threshold = opt_.rule(k).threshold;
  a.message = detail::cat("alarm ", alarm_kind_name(k), " at step ", step + 1, ": ", what);
  ++counts_[std::size_t(k)];
  return a;
}

std::vector<Alarm> AlarmMonitor::observe(const std::vector<nn::StepStats>& ranks) {
  TESSERA_CHECK(!ranks.empty(), "alarms: a step without figures");
  const nn::StepStats& s = ranks[0];
  double worst = 0;
  for (const nn::StepStats& r : ranks) worst = std::max(worst, r.step_time_s);
  std::vector<Alarm> out;
  // A spike against the median of the previous figures, edge-triggered.
  auto spike = [&](AlarmKind k, double value, const std::deque<double>& prev, const char* what, const char* unit) {
    const AlarmRule& r = opt_.rule(k);
    bool& active = active_[std::size_t(k)];
    if (!r.enabled() || static_cast<int>(prev.size()) < opt_.warmup) {
      active = false;
      return;
    }
    const double base = median(prev);
    const bool on = value > r.threshold * base;
    if (on && !active)
      out.push_back(make(k, s.step, value, base,
                         detail::cat(what, " ", fmt(value), unit, " is ", fmt(value / base), "x its median ", fmt(base),
                                     unit, " over the previous ", prev.size(), " steps (alarm at ", fmt(r.threshold),
                                     "x)")));
    active = on;
  };
  const bool counted = !s.skipped && std::isfinite(s.grad_norm);
  if (counted) spike(AlarmKind::GradNorm, s.grad_norm, grad_norms_, "the gradient norm", "");
  spike(AlarmKind::Loss, s.loss, losses_, "the loss", "");
  spike(AlarmKind::StepTime, worst, step_times_, "the slowest rank's step took", " s");
  if (counted) push(grad_norms_, s.grad_norm, opt_.window);
  push(losses_, s.loss, opt_.window);
  push(step_times_, worst, opt_.window);
  // The gradient norm's coefficient of variation over the window, this step included.
  {
    const AlarmRule& r = opt_.rule(AlarmKind::GradVariance);
    bool& active = active_[std::size_t(AlarmKind::GradVariance)];
    if (r.enabled() && counted && static_cast<int>(grad_norms_.size()) > opt_.warmup) {
      double mean = 0;
      for (double g : grad_norms_) mean += g;
      mean /= static_cast<double>(grad_norms_.size());
      double var = 0;
      for (double g : grad_norms_) var += (g - mean) * (g - mean);
      var /= static_cast<double>(grad_norms_.size() - 1);
      const double cv = mean > 0 ? std::sqrt(var) / mean : 0;
      const bool on = cv > r.threshold;
      if (on && !active)
        out.push_back(make(AlarmKind::GradVariance, s.step, cv, 1,
                           detail::cat("the gradient norm varies by ", fmt(cv * 100), "% of its mean ", fmt(mean),
                                       " (standard deviation over mean over the last ", grad_norms_.size(), " steps; alarm above ",
                                       fmt(r.threshold * 100), "%)")));
      active = on;
    } else if (!r.enabled()) {
      active = false;
    }
  }
  return out;
}

std::vector<Alarm> AlarmMonitor::nonfinite(const NonFiniteError& e) {
  if (!opt_.rule(AlarmKind::NonFinite).enabled()) return {};
  return {make(AlarmKind::NonFinite, e.step(), std::nan(""), 0, e.what())};
}

AlarmStopped::AlarmStopped(const Alarm& a)
    : Error(detail::cat(a.message, "; stopped, as the alarm's action (", alarm_action_name(a.action),
                        ") asks. Change it with --alarm ", alarm_kind_name(a.kind), "=THRESHOLD:warn, or turn it off with --alarm ",
                        alarm_kind_name(a.kind), "=off")),
      alarm_(a) {}

}  // namespace tessera::run
