// The device catalog: built-in datasheet figures (sources in each entry and in docs/simulator.md)
// and JSON add/replace/save.
#include "tessera/sim/devices.hpp"

#include <cmath>

#include "json_fields.hpp"

namespace tessera::sim {

using namespace json_fields;

namespace {

constexpr double kT = 1e12, kG = 1e9, kMiB = 1024.0 * 1024.0;

DeviceSpec gpu(const char* name, double fp32_t, double tf32_t, double bf16_t, double bw_gbps,
               double mib, const char* source) {
  DeviceSpec d;
  d.name = name;
  d.kind = "gpu";
  d.peak_fp32_flops = fp32_t * kT;
  d.peak_tf32_flops = tf32_t * kT;
  d.peak_bf16_flops = bf16_t * kT;
  d.mem_bw_bytes_per_s = bw_gbps * kG;
  d.capacity_bytes = mib * kMiB;
  d.source = source;
  return d;
}

/// An entry whose capacity is the datasheet's GB (10⁹ bytes): for the devices whose driver-reported
/// total (what the entries above use) is not known here; the two differ by a few percent.
DeviceSpec gpu_gb(const char* name, double fp32_t, double tf32_t, double bf16_t, double bw_gbps,
                  double gb, const char* source) {
  DeviceSpec d = gpu(name, fp32_t, tf32_t, bf16_t, bw_gbps, 1, source);
  d.capacity_bytes = gb * kG;
  return d;
}

/// The devices people buy now (issue 34). Efficiencies and launch overhead keep the catalog's
/// defaults: no datasheet gives them; calibrate on the machine to replace them.
void add_current_devices(DeviceCatalog& c) {
  c.add(
      gpu_gb("b200", 75, 1100, 2250, 7700, 180,
             "NVIDIA HGX B200 specifications (per GPU): FP32 75; TF32 2.2 and FP16/BF16 4.5 "
             "PFLOP/s with sparsity (halved here: dense 1,100 and 2,250 TFLOP/s); HBM3e 180 GB "
             "(datasheet GB), 7.7 TB/s (DGX B200 datasheet: 64 TB/s per 8 GPUs, 8 TB/s); NVLink 5 "
             "1.8 TB/s per GPU"));
  c.add(gpu_gb("gb200", 80, 1250, 2500, 8000, 186,
               "NVIDIA GB200 NVL72 specifications (per Blackwell GPU): FP32 80; TF32 2.5 and "
               "FP16/BF16 5 PFLOP/s with sparsity (halved here: dense 1,250 and 2,500 TFLOP/s); "
               "HBM3e 186 GB (datasheet GB; rack: 13.4 TB), 8 TB/s (rack: 576 TB/s); NVLink 5 1.8 "
               "TB/s per GPU"));
  c.add(gpu_gb("h20", 44, 74, 148, 4000, 96,
               "NVIDIA H20 (HGX H20): no public NVIDIA datasheet; figures as published from "
               "NVIDIA's partner specification: FP32 44, TF32 74, FP16/BF16 148 TFLOP/s dense; "
               "HBM3 96 GB, 4.0 TB/s; NVLink 900 GB/s"));
  c.add(gpu_gb("mi300x", 163.4, 653.7, 1307.4, 5300, 192,
               "AMD Instinct MI300X data sheet: FP32 vector 163.4, TF32 matrix 653.7, BF16/FP16 "
               "matrix 1,307.4 TFLOP/s dense; HBM3 192 GB, 5.3 TB/s; 7 Infinity Fabric links, 128 "
               "GB/s each (896 GB/s peak aggregate)"));
  c.add(gpu_gb("mi325x", 163.4, 653.7, 1307.4, 6000, 256,
               "AMD Instinct MI325X data sheet: compute as MI300X (FP32 vector 163.4, TF32 653.7, "
               "BF16/FP16 1,307.4 TFLOP/s dense); HBM3e 256 GB, 6 TB/s; 7 Infinity Fabric links, "
               "128 GB/s each"));
  c.add(gpu_gb("mi355x", 157.3, 0, 2516.6, 8000, 288,
               "AMD Instinct MI355X specifications: FP32 vector 157.3, BF16/FP16 matrix 2,516.6 "
               "TFLOP/s dense (2.5 PFLOP/s); no TF32 matrix (CDNA 4 has none: 0 here, so --tf32 "
               "times FP32); HBM3e 288 GB, 8 TB/s; 7 Infinity Fabric links, 153.6 GB/s each"));
  c.add(gpu_gb("l40s", 91.6, 183, 362.05, 864, 48,
               "NVIDIA L40S datasheet: FP32 91.6; TF32 183 and BF16 362.05 TFLOP/s dense (366 and "
               "733 with sparsity); GDDR6 48 GB, 864 GB/s; PCIe Gen4 x16 (64 GB/s bidirectional), "
               "no NVLink"));
}

}  // namespace

// Peaks are dense (no 2:4 sparsity), SXM boards at boost clock. Capacity is what the driver
// reports as total (nvidia-smi memory.total, MiB), which is what an allocator can see.
DeviceCatalog::DeviceCatalog() {
  add(gpu("a100-40gb", 19.5, 156, 312, 1555, 40960,
          "NVIDIA A100 Tensor Core GPU datasheet (SXM4 40GB): FP32 19.5, TF32 156, BF16 312 "
          "TFLOP/s dense; HBM2 1,555 GB/s; 40 GB"));
  add(gpu("a100-80gb", 19.5, 156, 312, 2039, 81920,
          "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB): FP32 19.5, TF32 156, BF16 312 "
          "TFLOP/s dense; HBM2e 2,039 GB/s; 80 GB"));
  add(gpu("h100-sxm", 67, 494.7, 989.4, 3350, 81559,
          "NVIDIA H100 Tensor Core GPU datasheet (SXM5): FP32 67, TF32 989 and BF16 1,979 TFLOP/s "
          "with sparsity (halved here: dense); HBM3 3.35 TB/s; 80 GB"));
  add(gpu("h200", 67, 494.7, 989.4, 4800, 143771,
          "NVIDIA H200 Tensor Core GPU datasheet (SXM): compute as H100 SXM (FP32 67, dense TF32 "
          "494.7, BF16 989.4 TFLOP/s); HBM3e 4.8 TB/s; 141 GB"));
  add(gpu("rtx3090", 35.6, 35.6, 71, 936, 24576,
          "NVIDIA Ampere GA102 whitepaper (GeForce RTX 3090): FP32 35.6; TF32 35.6 and BF16 71 "
          "TFLOP/s dense with FP32 accumulate; GDDR6X 936 GB/s; 24 GB"));
  add(gpu("rtx4090", 82.6, 82.6, 165.2, 1008, 24564,
          "NVIDIA Ada Lovelace architecture whitepaper (GeForce RTX 4090): FP32 82.6; TF32 82.6 "
          "and BF16 165.2 TFLOP/s dense with FP32 accumulate; GDDR6X 1,008 GB/s; 24 GB"));
  add(gpu("v100", 15.7, 0, 125, 900, 32768,
          "NVIDIA V100 Tensor Core GPU datasheet (SXM2 32GB): FP32 15.7; no TF32; FP16 tensor 125 "
          "TFLOP/s (no BF16); HBM2 900 GB/s; 32 GB"));

  add_current_devices(*this);

  DeviceSpec cpu;
  cpu.name = "cpu-host";
  cpu.kind = "cpu";
  cpu.peak_fp32_flops = 432e9;
  cpu.mem_bw_bytes_per_s = 24e9;
  cpu.capacity_bytes = 16 * 1024 * kMiB;
  cpu.eff_gemm = 0.45;
  cpu.eff_depthwise = 0.3;
  cpu.eff_elementwise = 0.8;
  cpu.launch_overhead_s = 1e-6;
  cpu.shm_bw_bytes_per_s = 13e9;
  cpu.shm_latency_s = 0.3e-6;
  cpu.source =
      "built-in defaults for this 2-core machine (docs REFERENCES.md: FP32 FMA ≈432 GFLOP/s and "
      "STREAM ≈24 GB/s on 2 threads, SGEMM 164–258 GFLOP/s, UCX shared memory 13 GB/s and 0.3 µs "
      "one-way; 16 GiB is a placeholder); replace by running tessera calibrate";
  add(cpu);
}

const DeviceSpec& DeviceCatalog::get(const std::string& name) const {
  const auto it = specs_.find(name);
  if (it != specs_.end()) return it->second;
  std::string known;
  for (const auto& [k, v] : specs_) known += (known.empty() ? "" : ", ") + k;
  throw InvalidArgument(detail::cat("sim: unknown device \"", name, "\"; known devices: ", known,
                                    " (add one with a device file)"));
}

bool DeviceCatalog::contains(const std::string& name) const { return specs_.count(name) > 0; }

std::vector<std::string> DeviceCatalog::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : specs_) out.push_back(k);
  return out;
}

void DeviceCatalog::add(DeviceSpec d) {
  const std::string where = "device \"" + d.name + "\"";
  TESSERA_CHECK(!d.name.empty(), "sim: a device has an empty name; give it a catalog key");
  TESSERA_CHECK(d.kind == "gpu" || d.kind == "cpu", "sim: ", where, ": kind \"", d.kind,
                "\" is neither \"gpu\" nor \"cpu\"");
  TESSERA_CHECK(d.peak_fp32_flops > 0 && d.mem_bw_bytes_per_s > 0 && d.capacity_bytes > 0,
                "sim: ", where, ": peak FP32, memory bandwidth and capacity must be positive");
  TESSERA_CHECK(d.peak_tf32_flops >= 0 && d.peak_bf16_flops >= 0 && d.launch_overhead_s >= 0 &&
                    d.shm_bw_bytes_per_s >= 0 && d.shm_latency_s >= 0,
                "sim: ", where, ": peaks, launch overhead and shared-memory figures must be ≥ 0");
  for (double eff : {d.eff_gemm, d.eff_depthwise, d.eff_elementwise})
    TESSERA_CHECK(eff > 0 && eff <= 1, "sim: ", where, ": efficiency ", eff,
                  " is outside (0, 1]; it is the fraction of peak a kernel reaches");
  specs_[d.name] = std::move(d);
}

namespace {

/// A JSON field of a device entry: its name, the member it sets and the unit factor.
struct Field {
  const char* key;
  double DeviceSpec::*member;
  double mul, div;  ///< base units = JSON value · mul / div
  bool integral;    ///< rounded to a whole number of base units (bytes, FLOP/s) when read
};
constexpr Field kFields[] = {
    {"peak_fp32_tflops", &DeviceSpec::peak_fp32_flops, 1e12, 1, true},
    {"peak_tf32_tflops", &DeviceSpec::peak_tf32_flops, 1e12, 1, true},
    {"peak_bf16_tflops", &DeviceSpec::peak_bf16_flops, 1e12, 1, true},
    {"mem_bw_GBps", &DeviceSpec::mem_bw_bytes_per_s, 1e9, 1, true},
    {"capacity_GB", &DeviceSpec::capacity_bytes, 1e9, 1, true},
    {"eff_gemm", &DeviceSpec::eff_gemm, 1, 1, false},
    {"eff_depthwise", &DeviceSpec::eff_depthwise, 1, 1, false},
    {"eff_elementwise", &DeviceSpec::eff_elementwise, 1, 1, false},
    {"launch_overhead_us", &DeviceSpec::launch_overhead_s, 1, 1e6, false},
    {"shm_bw_GBps", &DeviceSpec::shm_bw_bytes_per_s, 1e9, 1, true},
    {"shm_latency_us", &DeviceSpec::shm_latency_s, 1, 1e6, false},
};

}  // namespace

void DeviceCatalog::add_from_json(const std::string& text, const std::string& origin) {
  const Json doc = parse(text, origin);
  TESSERA_CHECK(doc.is_object(), "sim: ", origin,
                ": a device file is an object {\"devices\":[...]}");
  refuse_unknown(doc, {"devices"}, origin);
  const Json& list = required(doc, "devices", origin);
  TESSERA_CHECK(list.is_array(), "sim: ", origin, ": field \"devices\" must be an array");
  DeviceCatalog updated = *this;  // all or nothing
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::string where = detail::cat(origin, ": devices[", i, "]");
    const Json& e = list[i];
    TESSERA_CHECK(e.is_object(), "sim: ", where, " must be an object {\"name\", ...}");
    refuse_unknown(e,
                   {"name", "kind", "source", "peak_fp32_tflops", "peak_tf32_tflops",
                    "peak_bf16_tflops", "mem_bw_GBps", "capacity_GB", "eff_gemm", "eff_depthwise",
                    "eff_elementwise", "launch_overhead_us", "shm_bw_GBps", "shm_latency_us"},
                   where);
    const std::string name = string_field(required(e, "name", where), "name", where);
    where += " (\"" + name + "\")";
    const bool known = updated.contains(name);
    DeviceSpec d = known ? updated.get(name) : DeviceSpec{};
    d.name = name;
    if (!known)
      for (const char* key : {"peak_fp32_tflops", "mem_bw_GBps", "capacity_GB"})
        required(e, key, where);
    if (e.contains("kind")) d.kind = string_field(e["kind"], "kind", where);
    if (e.contains("source")) d.source = string_field(e["source"], "source", where);
    for (const Field& f : kFields) {
      if (!e.contains(f.key)) continue;
      const double x = number_field(e[f.key], f.key, where);
      TESSERA_CHECK(x >= 0 && x < 1e12, "sim: ", where, ": field \"", f.key, "\" is ", x,
                    "; it must be a non-negative number");
      const double base = x * f.mul / f.div;
      d.*f.member = f.integral ? std::round(base) : base;
    }
    try {
      updated.add(std::move(d));
    } catch (const InvalidArgument& err) {
      std::string msg = err.what();
      if (msg.rfind("sim: ", 0) == 0) msg = msg.substr(5);
      throw InvalidArgument(detail::cat("sim: ", origin, ": devices[", i, "]: ", msg));
    }
  }
  *this = std::move(updated);
}

std::string DeviceCatalog::to_json(const std::vector<std::string>& names) const {
  Json list = Json::array();
  for (const auto& name : names.empty() ? this->names() : names) {
    const DeviceSpec& d = get(name);
    Json e = {{"name", d.name}, {"kind", d.kind}};
    for (const Field& f : kFields) e[f.key] = d.*f.member * f.div / f.mul;
    e["source"] = d.source;
    list.push_back(std::move(e));
  }
  return Json{{"devices", list}}.dump(2);
}

}  // namespace tessera::sim
