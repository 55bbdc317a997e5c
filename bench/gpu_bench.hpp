// What bench_train and bench_conv share on a GPU (--device cuda): opening the cuda compute
// backend from the registry, timing between synchronize() calls, the device's measured copy
// bandwidth, and the PyTorch peer (bench/torch_gpu_peer.py) run as a subprocess.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/core/allocator.hpp"

namespace tessera::bench {

/// Exit status of a GPU bench that measured tessera but got no PyTorch figures to compare with.
inline constexpr int kExitNoPeer = 4;

/// "cuda" or "cuda:N" → N (0 for "cuda"); throws InvalidArgument for anything else.
int cuda_device_index(const std::string& device);

/// The cuda compute backend on one device and an allocator over its device memory.
struct Gpu {
  std::unique_ptr<compute::Backend> backend;
  std::shared_ptr<core::DeviceMemory> memory;
  core::AllocatorPtr allocator;  ///< books tessera's tensors on `memory`
  std::string description;       ///< memory->describe(): "cuda:0 (NVIDIA H200, 139 GiB)"
};

/// Creates compute backend "cuda" from tessera's registry on `device` ("cuda", "cuda:N") with
/// BackendOptions{1 thread, N, tf32}. Throws the backend's own error without a usable device
/// (tessera::Unsupported "cuda: built, no CUDA device visible ..."), and Unsupported naming the
/// fix when this binary was built without the cuda backend.
Gpu open_gpu(const std::string& device, bool tf32, const std::string& who);

/// Wall-clock milliseconds of `fn`, with `be.synchronize()` before the clock starts and before it
/// stops: `warmup` untimed calls, then `reps` timed ones.
template <class Fn>
Stats time_synced_ms(compute::Backend& be, int warmup, int reps, Fn&& fn);

/// The device's copy bandwidth, read + written bytes per second of a device-to-device Tensor
/// copy_from of `bytes` bytes (through the backend's DeviceMemory), median of `reps`.
struct CopyBandwidth {
  double bytes = 0;         ///< size of the copied tensor
  Stats ms;                 ///< per copy
  double bytes_per_s = 0;   ///< 2 · bytes / median time (read + write, as bandwidthTest counts D2D)
};
CopyBandwidth measure_copy_bandwidth(Gpu& gpu, double bytes, int reps);

/// What the PyTorch peer printed: its JSON object, or why there is none.
struct Peer {
  bool ok = false;
  std::string error;     ///< "torch is not importable ...", "exit status 1 and no JSON", ...
  nlohmann::json result; ///< the object (with "error" when the script reported one)
};

/// Where the script and the interpreter are: --peer-script / --python, else the environment
/// (TESSERA_TORCH_GPU_PEER, TESSERA_PYTHON), else the source tree's bench/torch_gpu_peer.py and
/// python3.
struct PeerCommand {
  std::string python = "python3";
  std::string script;
};
PeerCommand default_peer_command();

/// Runs `python script --json args...` (stdin closed, stderr passed through) and parses the last
/// line of its stdout as JSON. Never throws for the peer's failures: they come back in `error`.
Peer run_torch_peer(const PeerCommand& cmd, const std::vector<std::string>& args);

/// JSON text of the peer for the bench's output: its object, or {"error": ...}.
std::string peer_json(const Peer& p);

/// j[key] as text: a string as it is, another value as JSON, "?" when absent.
std::string json_text(const nlohmann::json& j, const char* key);

/// `a / b` as "%.2f", or "n/a" when b is not positive.
std::string ratio_text(double a, double b);

// ---- template definition ----------------------------------------------------------------------

template <class Fn>
Stats time_synced_ms(compute::Backend& be, int warmup, int reps, Fn&& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    be.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    be.synchronize();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return stats_of(ms);
}

}  // namespace tessera::bench
