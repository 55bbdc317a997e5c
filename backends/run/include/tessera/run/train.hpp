// A training run of a RunSpec: one thread per rank on the local backend, or one rank per process
// (env:// rendezvous) on a multi-process backend such as ucx; per-step callbacks, the metrics and
// trace files, and the run's summary as text and as JSON (what `tessera train` and tessera.train
// report).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/run/alarms.hpp"
#include "tessera/run/resolve.hpp"
#include "tessera/run/spec.hpp"

namespace tessera::run {

/// Called on rank 0 after every step with every rank's figures.
using StepCallback = std::function<void(const std::vector<nn::StepStats>&)>;
/// Called on rank 0 for every alarm that fires (after it is in the metrics file and its action
/// is done, before a stop ends the run).
using AlarmCallback = std::function<void(const Alarm&)>;

struct TrainResult {
  std::vector<std::vector<nn::StepStats>> steps;  ///< [step][rank]
  double wall_s = 0;
  std::int64_t parameters = 0;
  int rank = 0;  ///< this process's rank (0 on the local backend)
  /// The trace file this process wrote: spec.trace, or with one rank per process, for ranks other
  /// than 0, spec.trace with ".rank<r>" before its extension (each process records its own rank).
  std::string trace_path;
  std::vector<Alarm> alarms;  ///< every alarm that fired, in order (rank 0's; the others' are the same)
};

/// Trains on mesh.size() ranks; `on_step` runs on rank 0 after every step. Writes the metrics file
/// after every step and the trace and checkpoint at the end (all atomically). A diverged run
/// throws the trainer's NonFiniteError (every rank, same step): the metrics file keeps the steps
/// that completed, the trace is written (those steps and the failed one up to the check), and no
/// checkpoint is written (an existing save file stays).
///
/// Alarms (setup.alarms, alarms.hpp) are judged on every rank from the gathered figures, so all
/// decide alike. A fired alarm is written to the metrics file in its step's line ("alarms"; a
/// non-finite step, which did not complete, as a line of its own with an "alarm" key), printed to stderr the first time its kind
/// fires (with a word that later ones go to the metrics file only), passed to `on_alarm`, and its
/// action done on every rank: save writes setup.save + ".alarm-step<N>" (collective), stop throws
/// AlarmStopped on every rank after the step's metrics are written. A non-finite step is recorded
/// as a nonfinite alarm (and saved from the state before it with save+stop) before the trainer's
/// NonFiniteError propagates.
TrainResult train(const TrainSetup& setup, const StepCallback& on_step = nullptr, const AlarmCallback& on_alarm = nullptr);
/// resolve_train(spec), then train.
TrainResult train(const RunSpec& spec, const StepCallback& on_step = nullptr, const AlarmCallback& on_alarm = nullptr);

/// The closing summary as text: loss first/last, step time (median, excluding the first step),
/// images/s, and peak memory per rank by category.
std::string training_summary(const TrainSetup& setup, const TrainResult& r);

/// One metrics line: {"step":..,"loss":..,"step_time_s":..,"images_per_s":..,"lr":..,
/// "grad_norm":..,"peak_bytes":[{"rank":0,"total":..,"parameter":..,...},...]}, with
/// "alarms":[alarm_json...] when the step fired any.
std::string metrics_line(const TrainSetup& setup, const std::vector<nn::StepStats>& ranks,
                         const std::vector<Alarm>& alarms = {});

/// One step as JSON: {"step", "loss", "grad_norm", "lr", "step_time_s" (rank 0's),
/// "step_time_s_per_rank": [...], "peak_memory_bytes": [{category: bytes, "total"}, ...]}.
std::string step_json(const std::vector<nn::StepStats>& ranks);

/// The run as JSON: {"model", "mesh", "backend", "rank", "parameters", "wall_s",
/// "steps": [step_json...], "summary": training_summary text}.
std::string train_json(const TrainSetup& setup, const TrainResult& r);

}  // namespace tessera::run
