// Training alarms (run/alarms.hpp) on made-up step figures: when each rule fires, that it fires
// once per episode, not during warmup, not on a smooth run, and what bad --alarm text says.
#include <cmath>
#include <nlohmann/json.hpp>

#include "support/catch.hpp"
#include "tessera/run/alarms.hpp"

using namespace tessera;
using namespace tessera::run;

namespace {

std::vector<nn::StepStats> step(std::int64_t i, double loss, double grad_norm, double time_s, bool skipped = false) {
  nn::StepStats s;
  s.step = i;
  s.loss = loss;
  s.grad_norm = grad_norm;
  s.step_time_s = time_s;
  s.skipped = skipped;
  nn::StepStats other = s;
  other.step_time_s = time_s / 2;  // the slowest rank is what counts
  return {other, s};
}

std::string message_of(std::string_view text) {
  try {
    parse_alarms(text);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

bool has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

}  // namespace

TEST_CASE("alarms stay silent on a smooth run and fire once per spike", "[run][alarms]") {
  AlarmMonitor m;  // the defaults
  std::vector<Alarm> all;
  for (int i = 0; i < 40; ++i) {
    // A loss that falls, a norm that jitters by 20% around a slow decline, steady steps.
    const double jitter = (i % 3 == 0) ? 1.2 : (i % 3 == 1 ? 0.9 : 1.0);
    for (const Alarm& a : m.observe(step(i, 2.0 * std::exp(-0.05 * i), (5 - 0.05 * i) * jitter, 0.1 + 0.01 * (i % 2))))
      all.push_back(a);
  }
  REQUIRE(all.empty());
  // A 20x gradient norm, a 12x loss and a 5x step at step 40: each fires once, with its figures,
  // and the norm's window now varies by more than its mean (one 60 among nineteen ~3s).
  std::vector<Alarm> a = m.observe(step(40, 20 * 2.0 * std::exp(-0.05 * 39), 20 * 3.0, 0.5));
  REQUIRE(a.size() == 4);
  REQUIRE(a[0].kind == AlarmKind::GradNorm);
  REQUIRE(a[1].kind == AlarmKind::Loss);
  REQUIRE(a[2].kind == AlarmKind::StepTime);
  REQUIRE(a[2].value == 0.5);  // the slowest rank's
  REQUIRE(a[3].kind == AlarmKind::GradVariance);
  REQUIRE(a[3].value > 1);
  a.pop_back();
  for (const Alarm& x : a) {
    REQUIRE(x.step == 40);
    REQUIRE(x.action == AlarmAction::Warn);
    REQUIRE(x.value > x.threshold * x.baseline);
    REQUIRE(has(x.message, "at step 41"));
  }
  REQUIRE(a[0].threshold == 10);
  REQUIRE(has(a[0].message, "the gradient norm 60 is"));
  // The same conditions on the next step are the same episodes: no new alarm.
  REQUIRE(m.observe(step(41, 6.0, 60.0, 0.5)).size() == 0);
  // Back to normal, then a new spike: fires again.
  for (int i = 42; i < 46; ++i) REQUIRE(m.observe(step(i, 0.3, 3.0, 0.1)).empty());
  a = m.observe(step(46, 0.3, 300.0, 0.1));
  REQUIRE(a.size() == 1);
  REQUIRE(a[0].kind == AlarmKind::GradNorm);
  REQUIRE(m.counts()[std::size_t(AlarmKind::GradNorm)] == 2);
  REQUIRE(m.counts()[std::size_t(AlarmKind::Loss)] == 1);
}

TEST_CASE("alarms wait for the warmup and leave skipped steps out", "[run][alarms]") {
  AlarmMonitor m(parse_alarms("warmup=3,grad_variance=off"));
  // Steps 0-2 are the warmup: a spike there is the run's start, not an alarm.
  REQUIRE(m.observe(step(0, 9.0, 1.0, 5.0)).empty());
  REQUIRE(m.observe(step(1, 1.0, 100.0, 0.1)).empty());
  REQUIRE(m.observe(step(2, 1.0, 1.0, 0.1)).empty());
  // An fp16 step skipped for overflow has an infinite norm: not a gradient figure of the run.
  REQUIRE(m.observe(step(3, 1.0, INFINITY, 0.1, /*skipped=*/true)).empty());
  // Only 3 norms are in the window (median 1), so 11 fires; the skipped step did not count.
  const std::vector<Alarm> a = m.observe(step(4, 1.0, 11.0, 0.1));
  REQUIRE(a.size() == 1);
  REQUIRE(a[0].kind == AlarmKind::GradNorm);
  REQUIRE(a[0].baseline == 1.0);
}

TEST_CASE("the gradient-variance alarm measures the norm's coefficient of variation", "[run][alarms]") {
  AlarmMonitor m(parse_alarms("grad_variance=0.5:stop,grad_norm=off,window=4,warmup=2"));
  // Norms 1, 1, 1: no variation.
  for (int i = 0; i < 3; ++i) REQUIRE(m.observe(step(i, 1, 1, 0.1)).empty());
  // 1, 1, 1, 3: mean 1.5, sample standard deviation 1, CV 2/3 > 0.5.
  const std::vector<Alarm> a = m.observe(step(3, 1, 3, 0.1));
  REQUIRE(a.size() == 1);
  REQUIRE(a[0].kind == AlarmKind::GradVariance);
  REQUIRE(a[0].action == AlarmAction::Stop);
  REQUIRE(std::abs(a[0].value - 2.0 / 3.0) < 1e-12);
  REQUIRE(has(a[0].message, "66.67% of its mean 1.5"));
  const AlarmStopped stopped(a[0]);
  REQUIRE(has(stopped.what(), "stopped, as the alarm's action (stop) asks"));
  REQUIRE(has(stopped.what(), "--alarm grad_variance=off"));
}

TEST_CASE("a non-finite step is an alarm with the trainer's message", "[run][alarms]") {
  AlarmMonitor m(parse_alarms("nonfinite=save+stop"));
  const NonFiniteError e("training diverged at step 3/9: the loss is nan", 2, "");
  const std::vector<Alarm> a = m.nonfinite(e);
  REQUIRE(a.size() == 1);
  REQUIRE(a[0].kind == AlarmKind::NonFinite);
  REQUIRE(a[0].action == AlarmAction::SaveStop);
  REQUIRE(a[0].step == 2);
  REQUIRE(has(a[0].message, "the loss is nan"));
  const nlohmann::json j = nlohmann::json::parse(alarm_json(a[0]));
  REQUIRE(j["alarm"] == "nonfinite");
  REQUIRE(j["step"] == 2);
  REQUIRE(j["value"].is_null());
  REQUIRE(j["action"] == "save+stop");
}

TEST_CASE("alarm options parse over the defaults and bad text is refused with the syntax", "[run][alarms]") {
  const AlarmOptions d = parse_alarms("");
  REQUIRE(alarms_text(d) ==
          "grad_norm=10:warn,grad_variance=1:warn,loss=4:warn,step_time=3:warn,nonfinite=stop,window=20,warmup=5");
  const AlarmOptions o = parse_alarms(" loss=2:stop , step_time=off,grad_norm=save,window=50,warmup=10");
  REQUIRE(o.rule(AlarmKind::Loss).threshold == 2);
  REQUIRE(o.rule(AlarmKind::Loss).action == AlarmAction::Stop);
  REQUIRE(!o.rule(AlarmKind::StepTime).enabled());
  REQUIRE(o.rule(AlarmKind::GradNorm).threshold == 10);
  REQUIRE(o.rule(AlarmKind::GradNorm).action == AlarmAction::Save);
  REQUIRE(o.any_saves());
  REQUIRE(!d.any_saves());
  REQUIRE(o.window == 50);
  REQUIRE(parse_alarms(alarms_text(o)).rules[2].threshold == 2);  // the text form round-trips
  REQUIRE(has(message_of("loss"), "alarm entry 'loss': no '='"));
  REQUIRE(has(message_of("lost=3"), "no alarm named 'lost'"));
  REQUIRE(has(message_of("loss=abc"), "the threshold 'abc' must be a positive number"));
  REQUIRE(has(message_of("loss=0.5"), "would fire on ordinary steps"));
  REQUIRE(has(message_of("loss=3:shout"), "action 'shout'"));
  REQUIRE(has(message_of("nonfinite=warn"), "nonfinite takes stop or save+stop"));
  REQUIRE(has(message_of("step_time=off,step_time=stop"), "step_time is off; give a threshold"));
  REQUIRE(has(message_of("window=1"), "window must be an integer of at least 2"));
  REQUIRE(has(message_of("window=5,warmup=8"), "warmup=8 is longer than window=5"));
}
