// Calibration: this machine's measured speeds (written by `tessera calibrate`) — a device entry
// for the catalog, the figures of the links between in-process ranks, and a measured rate per
// kernel class — with its JSON file format and what a simulation takes from it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tessera/nn/precision.hpp"
#include "tessera/sim/devices.hpp"
#include "tessera/sim/engine.hpp"
#include "tessera/sim/topology.hpp"

namespace tessera::sim {

/// One timed call: its compute::op_cost and the median of its measured times.
struct KernelSample {
  double flops = 0;
  double bytes = 0;  ///< read + written
  double seconds = 0;
  bool in_step = false;  ///< timed inside a training step (else in the kernel suite, alone)
  double rows = 0;       ///< compute::OpCost::rows
};

/// What was measured for one kernel class and the rate fitted to it.
struct KernelCalibration {
  /// seconds ≈ overhead_s + flops / flops_per_s + bytes / bytes_per_s, fitted over `samples`.
  KernelRate rate;
  std::vector<KernelSample> samples;
};

/// The in-process (`local`) communication between two ranks, each fitted as t = latency + bytes/bw.
struct LinkCalibration {
  double p2p_latency_s = 0;             ///< a batch_p2p exchange (send and receive n bytes each)
  double p2p_bw_bytes_per_s = 0;
  double all_reduce_latency_s = 0;      ///< an all_reduce of n bytes (f32 sum)
  double all_reduce_bw_bytes_per_s = 0;
};

/// A device backend's memory copies (`tessera calibrate --device cuda`); empty for the host.
struct DeviceCopyCalibration {
  std::string memory;              ///< DeviceMemory::describe(): "cuda:0 (NVIDIA H200, 139 GiB)"
  double d2d_bw_bytes_per_s = 0;   ///< device-to-device Tensor copy, read + written bytes per second
  double h2d_bw_bytes_per_s = 0;   ///< host (pageable) to device, bytes per second
  double d2h_bw_bytes_per_s = 0;   ///< device to host (pageable), bytes per second
};

/// Everything a calibration file holds.
struct Calibration {
  /// The measured device ("cpu-host"; on a GPU the catalog entry of its model, "h200", with the
  /// measured copy bandwidth as mem_bw, see calibrate()): peak_fp32 from an FMA loop, mem_bw from a large add,
  /// launch overhead from a tiny kernel, shm bandwidth and latency from the p2p exchange, and the
  /// class efficiencies from the kernel rates.
  DeviceSpec device;
  int threads_per_rank = 1;   ///< compute threads of each rank while measuring
  int concurrent_ranks = 1;   ///< ranks that timed the kernels at the same time
  bool quick = false;
  std::string host;           ///< the machine's name
  std::string created_utc;    ///< "2025-01-31T12:00:00Z"
  LinkCalibration link;
  /// The runtime's host work per kernel call (measure_host_overhead), on top of each kernel's own
  /// time: apply_calibration adds it to every kernel rate's overhead.
  double host_overhead_s = 0;
  /// What a rank loses each time it waits for a halo exchange or a collective, beyond the
  /// transfer the link model times: blocking and waking, the receiver's copy, and the other
  /// ranks' jitter (the slowest rank sets the pace at every exchange). Fitted so that the
  /// simulated sharded reference runs spend what the measured ones spent outside their kernels
  /// (fit_wait_costs); apply_calibration sets EngineOptions::waits.
  WaitCosts waits;
  /// The share of a core each compute thread got while calibrating (CPU time / wall time of
  /// ranks·threads spinning threads, before and after the measurements): about 1 on an otherwise
  /// idle machine. Below ~0.9 other processes were running; the kernel times are medians, which
  /// leave out most of the time they took, but caches and memory bandwidth were shared, so the
  /// figures are less reliable. Recorded, not applied.
  double cpu_share = 1;
  /// The local ranks as a topology: cpu-host:2 on the calibrated device (its shm links carry the
  /// p2p figures).
  Topology topology;
  /// The precisions the kernels were timed in: fp32 always, and bf16 and fp16 when asked for
  /// (CalibrateOptions::precisions). A 16-bit call's class ends in "@bf16" or "@f16" and runs at
  /// other rates than the f32 one (the CPU's bf16 1×1 convolutions run through oneDNN, its other
  /// 16-bit calls widen to f32), so a simulation in a precision not listed here is refused
  /// (EngineOptions::kernel_rates_dtypes) rather than timed with the f32 rates.
  std::vector<nn::Precision> precisions = {nn::Precision::FP32};
  /// By kernel class (sim::kernel_class).
  std::map<std::string, KernelCalibration> kernels;
  /// Set when the kernels ran on a device (file field "device_copy", absent for the host).
  DeviceCopyCalibration device_copy;
};

/// The file's text (format "tessera-calibration", version 3; see docs/simulator.md). The reader
/// also takes version 2 (before "precisions": its kernels were timed in fp32 only).
std::string calibration_to_json(const Calibration& c);
/// Parses a calibration file. Anything malformed — a missing or unknown field, a wrong type, a
/// value out of range, an unknown kernel class, a device entry the catalog refuses — throws
/// InvalidArgument naming `origin` and the field.
Calibration calibration_from_json(const std::string& text, const std::string& origin = "calibration file");
/// Reads `path` (errors name the path).
Calibration load_calibration(const std::string& path);
/// Writes `path` atomically.
void save_calibration(const Calibration& c, const std::string& path);

/// Puts the calibrated device into `catalog` (replacing the entry of that name, so the cpu-host
/// topology presets built from this catalog get the measured links) and its kernel rates, each
/// overhead plus the host overhead per call, into `options` (for ops on that device), with the
/// dtypes of its precisions (kernel_rates_dtypes). The result predicts a machine that runs
/// nothing else.
void apply_calibration(const Calibration& c, DeviceCatalog& catalog, EngineOptions& options);

/// Fits seconds ≈ overhead + flops / flops_per_s + bytes / bytes_per_s + rows · row_s (+ the
/// bytes beyond `near_bytes` / far_bytes_per_s, when near_bytes > 0) by non-negative least
/// squares on the relative error: each term is ≥ 0, and a term the samples do not support is
/// dropped (its rate 0: no term). For a small convolution the bytes term matters as much as the
/// FLOPs; for an elementwise kernel the FLOPs term is usually dropped; the far term is what the
/// large calls, whose operands come from memory, pay beyond the small ones' rate.
KernelRate fit_kernel_rate(const std::vector<KernelSample>& samples, double near_bytes = 0);

/// Scales `kc.rate` (overhead and row cost up, both rates down, by one factor) so that it predicts
/// the in-step samples' total time: kernels inside training steps find their operands cold in the
/// caches and run slower than the suite's repeated calls. Without in-step samples, no change.
void anchor_to_steps(KernelCalibration& kc);

}  // namespace tessera::sim
