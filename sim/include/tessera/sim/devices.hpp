// Device catalog: peak throughput per dtype, memory bandwidth and capacity, with sources.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tessera::sim {

/// One device model. Units are SI base units (FLOP/s, bytes, bytes/s, s); JSON uses TFLOP/s, GB/s,
/// GB and µs (GB = 1e9 bytes).
struct DeviceSpec {
  std::string name;                  ///< catalog key: "a100-80gb", "h100-sxm", "cpu-host"
  std::string kind = "gpu";          ///< "gpu" or "cpu"
  double peak_fp32_flops = 0;        ///< dense FP32 (no tensor cores), FLOP/s
  double peak_tf32_flops = 0;        ///< dense TF32 tensor cores (0 = none)
  double peak_bf16_flops = 0;        ///< dense BF16/FP16 tensor cores
  double mem_bw_bytes_per_s = 0;     ///< device memory bandwidth
  double capacity_bytes = 0;         ///< device memory
  /// Fraction of peak a well-written kernel reaches, per op class (calibratable): convolution and
  /// GEMM (compute-bound), depthwise (memory-bound stencil), elementwise (bandwidth).
  double eff_gemm = 0.6, eff_depthwise = 0.5, eff_elementwise = 0.8;
  double launch_overhead_s = 5e-6;   ///< per kernel
  /// For a "cpu" device: one rank's copy bandwidth and one-way latency through shared memory to
  /// another rank on the same machine (the cpu-host preset's links); 0 elsewhere. Calibratable.
  double shm_bw_bytes_per_s = 0;
  double shm_latency_s = 0;
  std::string source;                ///< where the figures come from
};

/// The built-in entries (A100 40/80 GB, H100 SXM, H200, RTX 3090, RTX 4090, V100, B200, GB200,
/// H20, MI300X, MI325X, MI355X, L40S, cpu-host) plus
/// any added from files. Not global: callers own a catalog.
class DeviceCatalog {
 public:
  /// The built-in entries.
  DeviceCatalog();
  /// Throws InvalidArgument naming the known devices.
  const DeviceSpec& get(const std::string& name) const;
  bool contains(const std::string& name) const;
  /// Catalog keys in alphabetical order.
  std::vector<std::string> names() const;
  /// Adds or replaces `spec`; throws InvalidArgument for an empty name, an unknown kind, a
  /// negative figure, a zero FP32 peak, memory bandwidth or capacity, or an efficiency outside
  /// (0, 1].
  void add(DeviceSpec spec);
  /// Adds or replaces entries from JSON: {"devices":[{"name":..., "kind":..., "peak_fp32_tflops":...,
  /// "peak_tf32_tflops", "peak_bf16_tflops", "mem_bw_GBps", "capacity_GB", "eff_gemm",
  /// "eff_depthwise", "eff_elementwise", "launch_overhead_us", "shm_bw_GBps", "shm_latency_us",
  /// "source"}]}. A new name needs peak_fp32_tflops, mem_bw_GBps and capacity_GB; for a known name
  /// the fields given replace those of the entry (a calibration file lists only what it measured).
  /// Unknown fields, wrong types and out-of-range values throw InvalidArgument naming the entry
  /// and field; nothing is changed when the file is refused.
  void add_from_json(const std::string& text, const std::string& origin = "device file");
  /// {"devices":[...]} with every field of the named entries (all of them when `names` is empty).
  std::string to_json(const std::vector<std::string>& names = {}) const;

 private:
  std::map<std::string, DeviceSpec> specs_;
};

}  // namespace tessera::sim
