// A fired alarm's actions: checkpoint, notice, callback, stop.
#include "alarm_actions.hpp"

#include "run_metrics.hpp"

namespace tessera::run {

void AlarmActions::save(std::vector<Alarm>& fired) {
  std::string saved;
  for (Alarm& a : fired)
    if (a.action == AlarmAction::Save || a.action == AlarmAction::SaveStop) {
      if (saved.empty()) {
        saved = setup_.save + ".alarm-step" + std::to_string(a.step);
        trainer_.save(saved);
      }
      a.checkpoint = saved;
    }
}

void AlarmActions::report(const std::vector<Alarm>& fired, TrainResult& result,
                          const TrainCallbacks& callbacks) {
  for (const Alarm& a : fired) {
    result.alarms.push_back(a);
    bool& once = noticed_[std::size_t(a.kind)];
    if (a.kind != AlarmKind::NonFinite && !once) {
      std::string text = a.message + "; ";
      if (!a.checkpoint.empty()) text += "checkpoint written to " + a.checkpoint + "; ";
      text += setup_.metrics.empty()
                  ? "later alarms of this kind are counted in the summary"
                  : "later alarms of this kind go to " + setup_.metrics + " only";
      notify(callbacks, core::ReportLevel::Warning, text);
      once = true;
    }
    if (callbacks.on_alarm) callbacks.on_alarm(a);
  }
}

void AlarmActions::stop_if_asked(const std::vector<Alarm>& fired) {
  for (const Alarm& a : fired)
    if (a.action == AlarmAction::Stop || a.action == AlarmAction::SaveStop) throw AlarmStopped(a);
}

}  // namespace tessera::run
