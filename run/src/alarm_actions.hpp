// What a fired alarm does besides its line in the metrics file: a checkpoint (save: every rank,
// collective), a notice the first time its kind fires, the run's list and the front end's
// callback (rank 0), and the end of the run (stop: every rank).
#pragma once

#include <array>
#include <vector>

#include "tessera/nn/trainer.hpp"
#include "tessera/run/train.hpp"

namespace tessera::run {

class AlarmActions {
 public:
  AlarmActions(const TrainSetup& setup, nn::Trainer& trainer) : setup_(setup), trainer_(trainer) {}

  /// Every rank: for the alarms whose action saves, writes one checkpoint (setup.save +
  /// ".alarm-step<N>", from the trainer's state now) and names it in each.
  void save(std::vector<Alarm>& fired);
  /// Rank 0: a notice (Warning) for the first alarm of each kind (the non-finite one excepted:
  /// its error says it all), each alarm appended to `result.alarms` and passed to on_alarm.
  void report(const std::vector<Alarm>& fired, TrainResult& result,
              const TrainCallbacks& callbacks);
  /// Every rank: throws AlarmStopped for the first alarm whose action stops the run.
  static void stop_if_asked(const std::vector<Alarm>& fired);

 private:
  const TrainSetup& setup_;
  nn::Trainer& trainer_;
  std::array<bool, kNumAlarmKinds> noticed_{};
};

}  // namespace tessera::run
