// Measuring a calibration: times a representative set of kernels through a compute backend and
// the point-to-point and all-reduce cost between two in-process ranks through a communicator.
// The simulator depends on core only, so the caller supplies the real backends (`tessera
// calibrate` passes the cpu backend and comm::local::run).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/comm/backend.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/nn/trainer.hpp"
#include "tessera/sim/calibration.hpp"

namespace tessera::sim {

struct CalibrateOptions {
  int threads = 1;           ///< compute threads per rank
  /// Ranks that time the kernels at once, each with its own backend (they share the machine's
  /// cores, caches and memory bandwidth as the ranks of a run on this machine do).
  int ranks = 1;
  bool quick = false;        ///< fewer sizes and repetitions (a few seconds)
  /// The backend was created with BackendOptions::tf32 (a device's GEMM efficiency is then taken
  /// against its TF32 peak); recorded in the device entry's source.
  bool tf32 = false;
  /// The precisions to time the kernels in: fp32 (required), and bf16 and/or fp16 for
  /// simulations of mixed-precision runs. Each 16-bit one adds the suite's calls of a mixed-
  /// precision step in that dtype (classes "…@bf16", "…@f16") and the reference runs' unsharded
  /// steps in that precision; the f32 figures stay as without it.
  std::vector<nn::Precision> precisions = {nn::Precision::FP32};
};

/// Refuses precisions without fp32 or with one listed twice, naming them.
void check_precisions(const std::vector<nn::Precision>& precisions);

/// Creates one rank's compute backend with `threads` threads.
using ComputeFactory = std::function<std::unique_ptr<compute::Backend>(int threads)>;
/// Runs `fn` on `size` in-process ranks, one thread each, and returns when all have finished
/// (rethrowing a rank's failure). Under a launcher (one rank per process) it runs `fn` on this
/// process's rank of a `size`-rank communicator; the measurements then take this process's own
/// figures where in-process ranks would share theirs.
using WorldRunner = std::function<void(int size, const std::function<void(comm::Backend&)>& fn)>;
/// The WorldRunner of one rank of a multi-process job (`tessera launch`): a measurement on the
/// job's size runs on `world`; a smaller one on the first `size` ranks (split off; the others wait
/// at a barrier); a larger one is refused. `world` must outlive the runner.
WorldRunner job_world_runner(comm::Backend& world);
/// Progress lines ("kernels: 38 classes in 2.1 s").
using CalibrateLog = std::function<void(const std::string&)>;

/// Times the kernel suite on `options.ranks` ranks at once and fits each class's rate. The
/// samples are the medians over repetitions, averaged over the ranks.
std::map<std::string, KernelCalibration> measure_kernels(const ComputeFactory& make_compute,
                                                         const WorldRunner& run_world,
                                                         const CalibrateOptions& options,
                                                         const CalibrateLog& log = {});

/// Times batch_p2p exchanges and all_reduces of several sizes between two ranks.
LinkCalibration measure_link(const WorldRunner& run_world, const CalibrateOptions& options,
                             const CalibrateLog& log = {});

/// What training steps of the reference models show.
struct RuntimeCalibration {
  /// Per kernel class, one sample per kernel call of a rank's step (time: the mean over the
  /// steps), in_step set.
  std::map<std::string, std::vector<KernelSample>> samples;
  /// The runtime's own host work per kernel call: everything of a step that is neither a kernel
  /// nor data loading (module code, tensor allocation, gradient-bucket zeroing), divided by the
  /// step's kernel calls (median over steps and ranks).
  double host_overhead_s = 0;
  /// The sharded reference runs (with several ranks): what their steps spent outside kernels.
  struct ShardedRun {
    nn::TrainOptions options;
    int ranks = 0;
    /// Per step the slowest rank's time outside kernels and data loading (halo and all-reduce
    /// waits, copies, host work), median over the steps.
    double outside_s = 0;
    double kernel_calls = 0;  ///< per step on rank 0
    double kernel_s = 0;      ///< per step on rank 0: the sum of its calls' mean times
  };
  std::vector<ShardedRun> sharded;
};

/// The wait costs (Calibration::waits) that make the simulated sharded reference runs, timed
/// with `c` otherwise complete, spend outside their kernels what the measured ones did: per run,
/// measured − simulated ≈ p2p_s · halo waits + collective_s · collective waits of a rank's step,
/// fitted by non-negative least squares on the relative error over the runs. Zero without
/// sharded runs.
WaitCosts fit_wait_costs(const Calibration& c, const RuntimeCalibration& runtime);

/// Trains small reference models (ConvNeXt and RegNet, depths 1,1,1,1, widths 8-16-24-32 and
/// 32-64-96-128 on 3×64×256 and 24-48-72-96 on 3×32×128, batch 2) for a few steps on `options.ranks` ranks at
/// once, each rank its own unsharded model, then (with several ranks) the same models sharded
/// over the ranks, timing every kernel call where it really runs.
RuntimeCalibration measure_runtime(const ComputeFactory& make_compute, const WorldRunner& run_world,
                                   const CalibrateOptions& options, const CalibrateLog& log = {});

/// The share of a core each of `threads` threads gets (CPU time / wall time while they spin for
/// `seconds`): about 1 on an otherwise idle machine with at least `threads` cores.
double measure_cpu_share(int threads, double seconds);

/// A single thread's FP32 FMA throughput (FLOP/s) from a register-resident vector loop.
double measure_fma_peak(bool quick);

/// A device backend's own figures (its device_memory() non-null).
struct DeviceMeasurement {
  DeviceCopyCalibration copy;
  double launch_overhead_s = 0;  ///< per call of a one-element kernel, issue to issue
};
/// Times Tensor copies device→device (1 GiB, 256 MiB when quick), host→device and device→host,
/// and a one-element kernel, each between synchronize() calls. InvalidArgument for a host backend.
DeviceMeasurement measure_device(compute::Backend& be, bool quick);
/// The GPU model in a DeviceMemory description, lowercase: "cuda:0 (NVIDIA H200, 139 GiB)" → "h200".
std::string device_model_name(const std::string& memory_description);
/// The catalog entry named `model` ("h200"), or the one entry named "<model>-..." ("h100" →
/// "h100-sxm"); "" when there is none or more than one.
std::string catalog_device_for(const std::string& model, const DeviceCatalog& catalog);

/// The whole calibration: the kernel suite and the reference training steps (each class's rate
/// fitted over both sets of samples), the link, the host overhead, peak, memory bandwidth and
/// launch overhead, and the device entry ("cpu-host", which the cpu-host topology presets use)
/// and topology derived from them. With a device backend (make_compute's backend has a
/// device_memory()), the kernels run and are timed on the device, and the device entry is the
/// catalog entry of its model (e.g. "h200", so that `sim run --topology hgx-h200 --device h200
/// --calibration FILE` uses the measured figures; "cuda-<model>" from the catalog's defaults when
/// the catalog has no such model) with the measured copy bandwidth as mem_bw, the measured launch
/// overhead and the class efficiencies against its peak; device_copy holds the copies.
Calibration calibrate(const ComputeFactory& make_compute, const WorldRunner& run_world,
                      const CalibrateOptions& options, const CalibrateLog& log = {});

}  // namespace tessera::sim
