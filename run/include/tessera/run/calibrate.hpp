// `calibrate` as a function: measures this machine with the real compute backend (cpu, or cuda
// on one GPU) over in-process ranks, or over another comm backend with one rank per process under
// `tessera launch`, and writes the calibration file the simulator reads.
#pragma once

#include <functional>
#include <string>

#include "tessera/sim/calibration.hpp"

namespace tessera::run {

/// What to measure and where.
struct CalibrateRequest {
  std::string out = "calibration.json";  ///< the file written (by rank 0)
  int threads = 1;                       ///< compute threads per rank, 1 to 256
  int ranks = 1;                         ///< ranks timing the kernels at once, 1 to 64 (local)
  bool quick = false;                    ///< fewer sizes and repetitions (a few seconds)
  std::string backend = "local";         ///< local, or e.g. ucx (one rank per process)
  double timeout_s = 120;                ///< deadline of every communication wait (other backends)
  std::string device = "cpu";            ///< cpu, cuda, cuda:N
  bool tf32 = false;                     ///< cuda only: fp32 convolutions may use TF32
  /// The precisions to time the kernels in, comma-separated: fp32 and, for simulations of
  /// mixed-precision runs, bf16 and/or fp16 (sim::CalibrateOptions::precisions).
  std::string precisions = "fp32";
};

/// The measurement, and whether this process wrote it.
struct CalibrateResult {
  sim::Calibration calibration;
  bool writer = true;  ///< rank 0 (or the only process): the file was written, progress reported
  bool gpu = false;    ///< measured on a GPU (the device entry is its catalog model)
};

/// Measures (sim::calibrate) and, on the writer, saves to request.out. `progress` receives the
/// writer's progress lines ("kernels: 38 classes in 2.1 s"). Throws InvalidArgument for settings
/// out of range, Unsupported where the build or this machine lacks the device (the backend's
/// own reason), and what the comm backend throws.
CalibrateResult calibrate(const CalibrateRequest& request,
                          const std::function<void(const std::string&)>& progress);

}  // namespace tessera::run
