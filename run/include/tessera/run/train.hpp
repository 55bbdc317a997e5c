// A training run of a RunSpec: one thread per rank on the local backend, or one rank per process
// (env:// rendezvous) on a multi-process backend such as ucx; per-step callbacks, the metrics and
// trace files, and the run's summary as text and as JSON (what `tessera train` and tessera.train
// report). The run prints nothing: what a person should read comes through TrainCallbacks.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/core/report.hpp"
#include "tessera/run/alarms.hpp"
#include "tessera/run/resolve.hpp"
#include "tessera/run/spec.hpp"
#include "tessera/run/step_record.hpp"

namespace tessera::run {

/// Called on rank 0 after every step with every rank's figures (rank order) and the alarms the
/// step fired; step_record(setup.train.batch, ranks, alarms) is the step's record.
using StepCallback =
    std::function<void(const std::vector<nn::StepStats>& ranks, const std::vector<Alarm>& alarms)>;
/// Called on rank 0 for every alarm that fires (after it is in the metrics file and its action
/// is done, before a stop ends the run).
using AlarmCallback = std::function<void(const Alarm&)>;
/// A line a person should read, on rank 0: the live metrics address (Info; the CLI prints it to
/// stdout) and the first alarm of each kind (Warning, with where the later ones go; stderr).
using NoticeCallback = std::function<void(core::ReportLevel level, const std::string& text)>;

/// Called on rank 0 after every step of a run on an image folder, just before on_step, with what
/// each rank's dataset read and decoded in that step (rank order); step_record's `data`.
using StepDataCallback = std::function<void(const std::vector<data::DataStats>& ranks)>;

/// What a front end hears of a run as it goes; every member may be empty. A notice without
/// on_notice goes to core::report.
struct TrainCallbacks {
  StepCallback on_step;
  StepDataCallback on_step_data;
  AlarmCallback on_alarm;
  NoticeCallback on_notice;
};

struct TrainResult {
  std::vector<std::vector<nn::StepStats>> steps;  ///< [step][rank]
  double wall_s = 0;
  std::int64_t parameters = 0;
  int rank = 0;  ///< this process's rank (0 on the local backend)
  /// The trace file this process wrote: spec.trace, or with one rank per process, for ranks other
  /// than 0, spec.trace with ".rank<r>" before its extension (each process records its own rank).
  std::string trace_path;
  std::vector<Alarm>
      alarms;  ///< every alarm that fired, in order (rank 0's; the others' are the same)
  /// A run on an image folder: [step][rank], what each rank decoded in the step; empty otherwise.
  std::vector<std::vector<data::DataStats>> step_data;
  /// With init_from: what loading the weights did (every rank's is the same; `naming` empty
  /// without init_from). Also noticed (Info) before the first step.
  nn::WeightReport weights;
};

/// Trains on mesh.size() ranks; `callbacks.on_step` runs on rank 0 after every step. Writes the
/// metrics file (one step_record a line) after every step and the trace and checkpoint at the end
/// (all atomically). A diverged run throws the trainer's NonFiniteError (every rank, same step):
/// the metrics file keeps the steps that completed, the trace is written (those steps and the
/// failed one up to the check), and no checkpoint is written (an existing save file stays).
///
/// Alarms (setup.alarms, alarms.hpp) are judged on every rank from the gathered figures, so all
/// decide alike. A fired alarm is written to the metrics file in its step's record ("alarms"; a
/// non-finite step, which did not complete, as a line of its own with an "alarm" key), noticed
/// (Warning) the first time its kind fires (with a word that later ones go to the metrics file
/// only), passed to `on_alarm`, and its action done on every rank: save writes setup.save +
/// ".alarm-step<N>" (collective), stop throws AlarmStopped on every rank after the step's
/// metrics are written. A non-finite step is recorded as a nonfinite alarm (and saved from the
/// state before it with save+stop) before the trainer's NonFiniteError propagates.
TrainResult train(const TrainSetup& setup, const TrainCallbacks& callbacks = {});
/// resolve_train(spec), then train.
TrainResult train(const RunSpec& spec, const TrainCallbacks& callbacks = {});

/// This process's rank in a run of `setup`: 0 on the local backend (every rank is a thread of
/// it), else the rank the launcher gave it (env:// variables). Rank 0 reports for everyone.
int process_rank(const TrainSetup& setup);

/// The closing summary as text: loss first/last, step time (median, excluding the first step),
/// images/s, and peak memory per rank by category.
std::string training_summary(const TrainSetup& setup, const TrainResult& r);

/// The run as JSON: {"model", "mesh", "backend", "rank", "parameters", "wall_s",
/// "steps": [step_record...], "alarms": [alarm_json...], "summary": training_summary text}, and
/// with init_from "init_from": {"path", "naming", "loaded", "missing", "unexpected", "replaced",
/// "summary"}, on an image folder "data": [per rank, the run's totals as step_record's "data"].
std::string train_json(const TrainSetup& setup, const TrainResult& r);

}  // namespace tessera::run
