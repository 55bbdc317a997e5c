// A device backend's part of a calibration (`tessera calibrate --device cuda`): its memory's copy
// bandwidths, its per-call launch overhead, and the catalog entry its device is named after.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <sstream>

#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"
#include "tessera/sim/calibrate.hpp"

namespace tessera::sim {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Median wall time of `f` between be.synchronize() calls (one untimed call first).
template <class F>
double synced_median_s(compute::Backend& be, int reps, F&& f) {
  f();
  std::vector<double> ts;
  for (int r = 0; r < reps; ++r) {
    be.synchronize();
    const double t0 = now_s();
    f();
    be.synchronize();
    ts.push_back(now_s() - t0);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

}  // namespace

DeviceMeasurement measure_device(compute::Backend& be, bool quick) {
  const std::shared_ptr<core::DeviceMemory> memory = be.device_memory();
  TESSERA_CHECK(memory != nullptr, "calibrate: compute backend ", be.name(),
                " computes in host memory; measure_device needs a device backend (cuda)");
  auto alloc = std::make_shared<core::Allocator>("calibration", memory);
  using core::DType;
  using core::MemCategory;
  using core::Tensor;
  DeviceMeasurement m;
  m.copy.memory = memory->describe();
  const std::int64_t n = quick ? (64 << 20) : (256 << 20);  // floats: 256 MiB or 1 GiB
  const double bytes = 4.0 * static_cast<double>(n);
  const int reps = quick ? 5 : 11;
  {
    Tensor a = Tensor::zeros({n}, DType::F32, MemCategory::Workspace, alloc);
    Tensor b = Tensor::zeros({n}, DType::F32, MemCategory::Workspace, alloc);
    m.copy.d2d_bw_bytes_per_s = 2.0 * bytes / synced_median_s(be, reps, [&] { b.copy_from(a); });
    // Host side: ordinary (pageable) memory, as the runtime's host tensors are.
    const std::int64_t nh = n / 4;
    Tensor h = Tensor::zeros({nh}), d = Tensor::zeros({nh}, DType::F32, MemCategory::Workspace, alloc);
    m.copy.h2d_bw_bytes_per_s = 4.0 * double(nh) / synced_median_s(be, reps, [&] { d.copy_from(h); });
    m.copy.d2h_bw_bytes_per_s = 4.0 * double(nh) / synced_median_s(be, reps, [&] { h.copy_from(d); });
  }
  // Launch overhead: the issue rate of a one-element kernel, 1000 calls between synchronisations.
  Tensor one = Tensor::zeros({1}, DType::F32, MemCategory::Workspace, alloc);
  const int calls = 1000;
  m.launch_overhead_s = synced_median_s(be, quick ? 3 : 7, [&] {
                          for (int i = 0; i < calls; ++i) compute::scale(be, 1.0, one);
                        }) / calls;
  return m;
}

std::string device_model_name(const std::string& memory_description) {
  // "cuda:0 (NVIDIA H200, 139 GiB)" -> "NVIDIA H200" -> "h200".
  const auto open = memory_description.find('(');
  std::string model = open == std::string::npos ? memory_description : memory_description.substr(open + 1);
  model = model.substr(0, model.find_first_of(",)"));
  std::istringstream words(model);
  std::string w, first;
  while (words >> w) {
    std::transform(w.begin(), w.end(), w.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (w == "nvidia" || w == "tesla" || w == "geforce") continue;
    first = w;
    break;
  }
  std::string out;
  for (char ch : first) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '-';
  return out.empty() ? "gpu" : out;
}

std::string catalog_device_for(const std::string& model, const DeviceCatalog& catalog) {
  if (catalog.contains(model)) return model;
  std::string match;
  for (const std::string& name : catalog.names())
    if (name.rfind(model + "-", 0) == 0) {
      if (!match.empty()) return "";  // ambiguous (a100-40gb, a100-80gb)
      match = name;
    }
  return match;
}

}  // namespace tessera::sim
