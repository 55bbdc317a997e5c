// bench_train's command line: its options, their parsing, what a --device cuda run hands
// tessera's GPU trainer and the PyTorch peer (bench/torch_gpu_peer.py), and the synthetic data
// the CPU and GPU runs both read; kept apart from the measurements so that tests/bench can check
// that every option reaches both sides.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/data/dataset.hpp"
#include "tessera/nn/trainer.hpp"
#include "train_gpu.hpp"

namespace tessera::bench {

// Defaults sized for a 2-core machine, where a ConvNeXt-T step at 3x256x1024, batch 2, takes
// 3.5-6 s for tessera and ~4 s for libtorch on OpenBLAS: 6 configurations x (1 + 2) steps plus
// 2 x 4 libtorch steps (NCHW and channels-last; 4 forms with --precision bf16) take ~3 min wall
// on a quiet machine, several times that on a busy one.
// --steps N for tighter spreads.
struct TrainBenchOptions {
  bool json = false;
  bool help = false;  ///< --help: print the usage and exit 0
  int steps = 2;      ///< timed steps, after one warm-up step
  std::string model = "convnext-t";
  core::Shape input{3, 256, 1024};
  int batch = 2;
  int classes = 4;
  std::vector<int> ranks = {1, 2, 4};
  std::vector<std::string> checkpointing = {"none", "block"};
  /// fp32, then the --precision asked for (bf16, fp16) beside it, each configuration in both.
  std::vector<std::string> precisions = {"fp32"};
  /// Overlap of halo exchange and bucket all-reduce with compute: {true}, {false} or both.
  std::vector<bool> overlaps = {true};
  /// With checkpointing: halo-aware recompute (keep), re-exchanging (exchange), or both.
  std::vector<std::string> halo_recomputes = {"keep"};
  /// "local": P in-process ranks; another comm backend (ucx): this process is one rank of a job
  /// started by `tessera launch --nproc P`, and rank 0 prints.
  std::string backend = "local";
  bool torch = true;
  /// --simulate: `calibrations` rounds per rank count P of: calibrate this machine
  /// (sim::calibrate, as `tessera calibrate --ranks P --threads T` or `--backend ucx` under the
  /// launcher), then run every configuration on P ranks and simulate it with that calibration;
  /// --calibration FILE: one round, simulated with that file.
  bool simulate = false;
  int calibrations = 3;  ///< --simulate: rounds per rank count (the prediction: their median)
  std::string calibration;
  bool torch_linear = false;  ///< nn::Linear for the pointwise layers instead of 1x1 convs
  /// --mesh: the runs' mesh instead of "sp=P" for each of --ranks (e.g. "pp=2", "pp=2,sp=2");
  /// with a dim named pp, every run also reports its pipeline figures (train_pipeline.hpp).
  std::string mesh;
  /// --micro-batches: every configuration with each of these micro-batch counts (each divides
  /// --batch).
  std::vector<int> micro_batches = {1};
  /// --schedule: the pipeline schedules ("1f1b", "gpipe") every configuration with M > 1 runs in.
  std::vector<std::string> schedules = {"1f1b"};
  // --device cuda (train_gpu.cpp): everything above that applies (gpu_train_options), plus these.
  std::string device = "cpu";
  bool input_set = false, steps_set = false;
  GpuTrainOptions gpu;  ///< --tf32, --warmup, --pointwise, --peer-script, --python, --precision
};

/// A command line bench_train refuses: the bench prints the message and its usage, exit status 2.
class UsageError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

/// Parses bench_train's arguments (argv[0] is the program). Throws UsageError naming the option
/// for an unknown option, a missing value or a value out of its set; --help sets `help`.
TrainBenchOptions parse_train_options(int argc, const char* const* argv);

/// What a --device cuda run measures: the options that apply to one unsharded GPU rank (model,
/// input and steps where given, batch, precision, TF32, warm-up, the peer and its command).
GpuTrainOptions gpu_train_options(const TrainBenchOptions& o);

/// The nn::TrainOptions tessera's GPU trainer runs with: the model preset with o.classes classes
/// and DropPath off, o.input, o.batch, no checkpointing, o.warmup + o.steps steps, o.precision
/// (mixed precision as nn::TrainOptions defines it, as on the CPU) with the default loss scaling
/// (auto: dynamic for fp16 from 2^16, growing x2 every 2000 clean steps, backing off x0.5 — the
/// defaults of the peer's torch.amp.GradScaler; off for fp32 and bf16, as in the peer).
nn::TrainOptions gpu_trainer_options(const GpuTrainOptions& o);

/// The synthetic images both trainers read (CPU and --device cuda): `input` (CxHxW) in `classes`
/// classes, data::make_synthetic's defaults otherwise.
std::shared_ptr<const data::Dataset> synthetic_data(const core::Shape& input, int classes);

/// The arguments bench/torch_gpu_peer.py is run with (after --json) to train the same model on
/// the same input, batch, steps, warm-up, TF32 setting and precision.
std::vector<std::string> train_peer_args(const GpuTrainOptions& o);

}  // namespace tessera::bench
