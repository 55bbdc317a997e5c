// A training run of a RunSpec: one thread per rank on the local backend, or one rank per process
// (env:// rendezvous) on a multi-process backend such as ucx; per-step callbacks, the metrics and
// trace files, and the run's summary as text and as JSON (what `tessera train` and tessera.train
// report).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/run/resolve.hpp"
#include "tessera/run/spec.hpp"

namespace tessera::run {

/// Called on rank 0 after every step with every rank's figures.
using StepCallback = std::function<void(const std::vector<nn::StepStats>&)>;

struct TrainResult {
  std::vector<std::vector<nn::StepStats>> steps;  ///< [step][rank]
  double wall_s = 0;
  std::int64_t parameters = 0;
  int rank = 0;  ///< this process's rank (0 on the local backend)
  /// The trace file this process wrote: spec.trace, or with one rank per process, for ranks other
  /// than 0, spec.trace with ".rank<r>" before its extension (each process records its own rank).
  std::string trace_path;
};

/// Trains on mesh.size() ranks; `on_step` runs on rank 0 after every step. Writes the metrics file
/// after every step and the trace and checkpoint at the end (all atomically). A diverged run
/// throws the trainer's NonFiniteError (every rank, same step): the metrics file keeps the steps
/// that completed, the trace is written (those steps and the failed one up to the check), and no
/// checkpoint is written (an existing save file stays).
TrainResult train(const TrainSetup& setup, const StepCallback& on_step = nullptr);
/// resolve_train(spec), then train.
TrainResult train(const RunSpec& spec, const StepCallback& on_step = nullptr);

/// The closing summary as text: loss first/last, step time (median, excluding the first step),
/// images/s, and peak memory per rank by category.
std::string training_summary(const TrainSetup& setup, const TrainResult& r);

/// One metrics line: {"step":..,"loss":..,"step_time_s":..,"images_per_s":..,"lr":..,
/// "grad_norm":..,"peak_bytes":[{"rank":0,"total":..,"parameter":..,...},...]}.
std::string metrics_line(const TrainSetup& setup, const std::vector<nn::StepStats>& ranks);

/// One step as JSON: {"step", "loss", "grad_norm", "lr", "step_time_s" (rank 0's),
/// "step_time_s_per_rank": [...], "peak_memory_bytes": [{category: bytes, "total"}, ...]}.
std::string step_json(const std::vector<nn::StepStats>& ranks);

/// The run as JSON: {"model", "mesh", "backend", "rank", "parameters", "wall_s",
/// "steps": [step_json...], "summary": training_summary text}.
std::string train_json(const TrainSetup& setup, const TrainResult& r);

}  // namespace tessera::run
