// What bench_train and bench_conv share on a GPU (--device cuda): opening the cuda compute
// backend from the registry, timing batches of back-to-back calls between CUDA events, the
// device's measured copy bandwidth, and the PyTorch peer (bench/torch_gpu_peer.py) run as a
// subprocess.
#pragma once

#include <algorithm>
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

/// Most calls in one timed batch (calls_per_batch).
inline constexpr int kMaxCallsPerBatch = 10000;

/// Calls in one timed batch: the fewest back-to-back calls of `call_ms` each that last at least
/// `min_batch_ms` (ceil of the quotient), at least 1 and at most kMaxCallsPerBatch (also for a
/// call_ms that is zero or not a number). bench/torch_gpu_peer.py sizes its batches by the same
/// rule.
int calls_per_batch(double call_ms, double min_batch_ms);

/// Device time between two points of the cuda backend's compute stream (where it enqueues every
/// kernel, library call and copy): two CUDA events recorded on it. Throws Unsupported for another
/// backend, or in a bench built without the cuda backend.
class StreamTimer {
 public:
  explicit StreamTimer(compute::Backend& be);
  ~StreamTimer();
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;
  /// Records the first event: the work enqueued from now on is timed.
  void start();
  /// Records the second event, waits for it, and returns the milliseconds between the two.
  double stop_ms();

 private:
  void* stream_ = nullptr;  // cudaStream_t
  void* start_ = nullptr;   // cudaEvent_t
  void* stop_ = nullptr;
  int device_ = 0;
};

/// Per-call milliseconds of a batched measurement.
struct BatchedTiming {
  Stats ms;                 ///< over the batches: each batch's time divided by its calls
  int calls_per_batch = 1;  ///< N
};

/// Times `fn` (calls that enqueue work on be's compute stream) as a GPU runs it back to back,
/// without a host synchronisation between calls (which would make a short call measure the
/// launch and the wait, not the kernel): `warmup` untimed calls; one batch of max(1, warmup) calls
/// timed to size the batches (calls_per_batch with min_batch_ms); then `reps` batches of N calls,
/// each timed with a StreamTimer and divided by N. The PyTorch peer times its calls the same way.
template <class Fn>
BatchedTiming time_batched_ms(compute::Backend& be, int warmup, int reps, double min_batch_ms,
                              Fn&& fn);

/// The device's copy bandwidth, read + written bytes per second of a device-to-device Tensor
/// copy_from of `bytes` bytes (through the backend's DeviceMemory), median of `reps` batches of
/// copies (time_batched_ms, batches of at least `min_batch_ms`).
struct CopyBandwidth {
  double bytes = 0;        ///< size of the copied tensor
  BatchedTiming per_copy;  ///< milliseconds per copy
  double bytes_per_s = 0;  ///< 2 · bytes / median time (read + write, as bandwidthTest counts D2D)
};
CopyBandwidth measure_copy_bandwidth(Gpu& gpu, double bytes, int reps, double min_batch_ms);

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
BatchedTiming time_batched_ms(compute::Backend& be, int warmup, int reps, double min_batch_ms,
                              Fn&& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  StreamTimer timer(be);
  auto batch_ms = [&](int n) {
    timer.start();
    for (int i = 0; i < n; ++i) fn();
    return timer.stop_ms();
  };
  const int probe = std::max(1, warmup);
  BatchedTiming t;
  t.calls_per_batch = calls_per_batch(batch_ms(probe) / probe, min_batch_ms);
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) ms.push_back(batch_ms(t.calls_per_batch) / t.calls_per_batch);
  t.ms = stats_of(ms);
  return t;
}

}  // namespace tessera::bench
