// One rank's training loop: its layers under the Trainer (compute backend, allocator, trace
// recorders, fault injector, byte counter, mesh communicator), then step after step: train,
// gather every rank's figures, judge alarms, write and publish the metrics (rank 0), call back.
#pragma once

#include <memory>

#include "step_gather.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/core/trace.hpp"
#include "tessera/data/dataset.hpp"
#include "tessera/run/train.hpp"

namespace tessera::run {

/// What every rank of one run shares.
struct RankContext {
  const TrainSetup& setup;
  std::shared_ptr<const data::Dataset> dataset;
  compute::Registry& computes;
  core::TraceRecorder& recorder;
  const TrainCallbacks& callbacks;
  TrainResult& result;  ///< rank 0 fills steps, parameters and alarms
};

/// Trains `world`'s rank to setup.train.steps (from setup.resume's checkpoint, or with "auto"
/// the newest complete one of setup.save's) and saves (setup.save) at the end, and with
/// save_every also as SAVE.step<N> every save_every steps; `gather`
/// collects every rank's figures of a step (collective); `device_index` is the GPU it computes
/// on, if any. Throws the trainer's NonFiniteError and AlarmStopped after recording them.
void rank_loop(const RankContext& context, comm::Backend& world, int device_index,
               const Gather& gather);

}  // namespace tessera::run
