// Training alarms: what tells the operator of a long run, in time, that training is going wrong —
// a gradient-norm spike, a gradient norm that swings from step to step, a loss spike, a step that
// takes k times as long as usual (a throughput drop), a non-finite loss or gradient. Each is
// judged on figures every rank has (the gathered step figures), so every rank decides alike and
// the actions that need all of them (save a checkpoint, stop) stay collective.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/nn/trainer.hpp"

namespace tessera::run {

enum class AlarmKind : std::uint8_t { GradNorm, GradVariance, Loss, StepTime, NonFinite };
inline constexpr int kNumAlarmKinds = 5;
/// "grad_norm", "grad_variance", "loss", "step_time", "nonfinite" (the --alarm names).
std::string_view alarm_kind_name(AlarmKind k) noexcept;

/// What a fired alarm does besides being written to the metrics file and reported:
/// warn (nothing more), save (a checkpoint beside --save's: PATH.alarm-step<N>), stop (end the
/// run on every rank at this step with AlarmStopped; with save's checkpoint written first).
enum class AlarmAction : std::uint8_t { Warn, Save, Stop, SaveStop };
std::string_view alarm_action_name(AlarmAction a) noexcept;  ///< "warn", "save", "stop", "save+stop"

/// One alarm's rule: it fires when the step's figure exceeds `threshold` times its baseline
/// (see AlarmOptions); threshold 0 turns it off. NonFinite has no threshold (on or off).
struct AlarmRule {
  double threshold = 0;
  AlarmAction action = AlarmAction::Warn;
  bool enabled() const noexcept { return threshold > 0; }
};

/// The rules, by kind, and the window they look back over.
///
/// - grad_norm: the global gradient norm (before clipping) above threshold × the median of the
///   previous `window` steps' norms. Default 10.
/// - grad_variance: the coefficient of variation (standard deviation / mean) of the gradient norm
///   over the last `window` steps, this one included, above threshold. A healthy run's norm drifts
///   (it falls as training settles); one that swings by its own size from step to step is
///   unstable (too high a learning rate). Default 1.
/// - loss: the loss above threshold × the median of the previous `window` losses. Default 4.
/// - step_time: the slowest rank's step (loading included) above threshold × the median of the
///   previous `window` steps. Default 3.
/// - nonfinite: a non-finite loss or gradient norm; the trainer refuses the step (NonFiniteError)
///   and the run stops whatever the action, which may add save. Default stop.
///
/// A rule that compares with the previous steps fires only once `warmup` steps have been seen
/// (the first steps allocate, warm caches and move fastest), and is edge-triggered: it fires when
/// its condition turns true and again only after it has been false. Steps skipped by dynamic
/// loss scaling (their gradients overflowed) are not figures of the run and are left out.
struct AlarmOptions {
  std::array<AlarmRule, kNumAlarmKinds> rules{{{10, AlarmAction::Warn},
                                               {1, AlarmAction::Warn},
                                               {4, AlarmAction::Warn},
                                               {3, AlarmAction::Warn},
                                               {1, AlarmAction::Stop}}};
  int window = 20;
  int warmup = 5;
  AlarmRule& rule(AlarmKind k) noexcept { return rules[static_cast<std::size_t>(k)]; }
  const AlarmRule& rule(AlarmKind k) const noexcept { return rules[static_cast<std::size_t>(k)]; }
  bool any_saves() const noexcept;
};

/// Parses a comma-separated list over the defaults: `name=THRESHOLD[:ACTION]`, `name=off`,
/// `name=ACTION` (nonfinite: stop or save), `window=N`, `warmup=N`; e.g.
/// "loss=2:stop,step_time=off,window=50". An empty string gives the defaults. Throws
/// InvalidArgument naming the entry and the choices.
AlarmOptions parse_alarms(std::string_view text);
/// The options in parse_alarms' syntax, every rule spelled out.
std::string alarms_text(const AlarmOptions& o);

/// A fired alarm.
struct Alarm {
  AlarmKind kind = AlarmKind::Loss;
  AlarmAction action = AlarmAction::Warn;
  std::int64_t step = 0;   ///< 0-based, as the metrics' "step"
  double value = 0;        ///< the step's figure (for grad_variance: the coefficient of variation)
  double baseline = 0;     ///< the median it was compared with (grad_variance: 1; nonfinite: 0)
  double threshold = 0;
  std::string message;     ///< one sentence: what, how much, against what, what it did
  std::string checkpoint;  ///< the checkpoint an action save wrote ("" if none)
};

/// The alarm as one metrics-file line: {"alarm":name,"step":..,"value":..,"baseline":..,
/// "threshold":..,"action":..,"message":..[,"checkpoint":..]}.
std::string alarm_json(const Alarm& a);

/// Watches a run's steps. Feed it every completed step's gathered figures in order.
class AlarmMonitor {
 public:
  explicit AlarmMonitor(AlarmOptions options = {});
  /// The alarms this step fires (the same on every rank for the same figures).
  std::vector<Alarm> observe(const std::vector<nn::StepStats>& ranks);
  /// The alarm of a step the trainer refused as non-finite (empty when nonfinite is off).
  std::vector<Alarm> nonfinite(const NonFiniteError& e);
  /// How many times each kind fired.
  const std::array<std::int64_t, kNumAlarmKinds>& counts() const noexcept { return counts_; }
  const AlarmOptions& options() const noexcept { return opt_; }

 private:
  Alarm make(AlarmKind k, std::int64_t step, double value, double baseline, std::string what);
  AlarmOptions opt_;
  std::deque<double> grad_norms_, losses_, step_times_;  ///< the last `window` figures
  std::array<bool, kNumAlarmKinds> active_{};
  std::array<std::int64_t, kNumAlarmKinds> counts_{};
};

/// An alarm whose action is stop ended the run (every rank, the same step).
class AlarmStopped : public Error {
 public:
  explicit AlarmStopped(const Alarm& a);
  const Alarm& alarm() const noexcept { return alarm_; }

 private:
  Alarm alarm_;
};

}  // namespace tessera::run
