// The training run behind `tessera train` (and bench/train): options, the per-rank loop on the
// local backend, metrics and trace files, and the final summary.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "tessera/core/mesh.hpp"
#include "tessera/nn/trainer.hpp"

namespace tessera::tools {

/// Command-line values of `tessera train`.
struct TrainArgs {
  std::string model = "convnext-atto";
  std::string input = "3x256x1024";
  int batch = 2;
  std::string mesh = "sp=2";
  std::string shard = "W";
  std::string backend = "local";
  int steps = 30;
  std::string checkpointing = "none";
  std::string optimizer = "adamw";
  double lr = 2e-3;
  double weight_decay = 0.05;
  double momentum = 0.9;
  int warmup = 5;
  double clip = 1.0;
  unsigned long long seed = 0;
  // Segmentation by default: its per-pixel loss visibly falls within the ~30 steps the default
  // run takes; classifying one shape that covers a few percent of a 256x1024 image takes
  // hundreds of steps before the loss leaves chance.
  std::string task = "segment";
  int classes = 5;
  double drop_path = -1;  ///< < 0: the model's own
  std::string data = "synthetic";
  std::string save, resume, trace, metrics;
  int threads = 0;  ///< compute threads per rank; 0 = cores / ranks
  bool no_overlap = false;
  double timeout_s = 300;  ///< deadline of every communication wait
  std::string dtype = "f32";  ///< one of nn::training_dtypes(): f32, or f64 (the exact reference)
};

/// Adds every `train` option to a CLI11 (sub)command.
void add_train_options(CLI::App& cmd, TrainArgs& a);

struct TrainRunConfig {
  nn::TrainOptions train;
  core::DeviceMesh mesh;
  std::string backend = "local";
  int threads = 1;
  std::string data = "synthetic";
  std::string save, resume, trace, metrics;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

/// Validates and converts the arguments (model preset or JSON file, input, mesh, ...).
TrainRunConfig make_train_config(const TrainArgs& a);

struct TrainRunResult {
  std::vector<std::vector<nn::StepStats>> steps;  ///< [step][rank]
  double wall_s = 0;
  std::int64_t parameters = 0;
  /// The trace file this process wrote: --trace, or with one rank per process, for ranks other
  /// than 0, --trace with ".rank<r>" before its extension (each process records its own rank).
  std::string trace_path;
};

/// Trains on mesh.size() in-process ranks; `on_step` runs on rank 0 after every step with every
/// rank's figures. Writes the metrics file after every step and the trace and checkpoint at the
/// end (all atomically). A diverged run throws the trainer's NonFiniteError (every rank, same
/// step): the metrics file keeps the steps that completed, the trace is written (those steps and
/// the failed one up to the check), and no checkpoint is written (an existing --save file stays).
TrainRunResult run_training(const TrainRunConfig& cfg,
                            const std::function<void(const std::vector<nn::StepStats>&)>& on_step);

/// The closing summary: loss first/last, step time (median, excluding the first step), images/s,
/// and peak memory per rank by category.
std::string training_summary(const TrainRunConfig& cfg, const TrainRunResult& r);

/// One metrics line: {"step":..,"loss":..,"step_time_s":..,"images_per_s":..,"lr":..,
/// "grad_norm":..,"peak_bytes":[{"rank":0,"total":..,"parameter":..,...},...]}.
std::string metrics_line(const TrainRunConfig& cfg, const std::vector<nn::StepStats>& ranks);

}  // namespace tessera::tools
