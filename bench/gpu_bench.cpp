// The GPU helpers of bench_train and bench_conv: the cuda backend from the registry, batched
// timing between CUDA events, the copy bandwidth probe and the PyTorch peer subprocess
// (gpu_bench.hpp).
#include "gpu_bench.hpp"

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tessera/builtin_backends.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"

#ifdef TESSERA_BENCH_HAVE_CUDA_BACKEND
#include <cuda_runtime.h>

#include "tessera/compute/cuda.hpp"
#endif

#ifndef TESSERA_BENCH_TORCH_GPU_PEER
#define TESSERA_BENCH_TORCH_GPU_PEER "bench/torch_gpu_peer.py"
#endif

namespace tessera::bench {

int cuda_device_index(const std::string& device) {
  if (device == "cuda") return 0;
  const std::string prefix = "cuda:";
  bool digits = device.size() > prefix.size() && device.compare(0, prefix.size(), prefix) == 0;
  for (std::size_t i = prefix.size(); digits && i < device.size(); ++i)
    digits = device[i] >= '0' && device[i] <= '9';
  TESSERA_CHECK(digits && device.size() - prefix.size() <= 4, "--device '", device,
                "': expected cpu, cuda or cuda:N (N a device index, e.g. cuda:0)");
  return std::atoi(device.c_str() + prefix.size());
}

Gpu open_gpu(const std::string& device, bool tf32, const std::string& who) {
  const int index = cuda_device_index(device);
  compute::Registry registry;
  register_builtin_backends(registry);
  if (!registry.contains("cuda"))
    throw Unsupported(who + " --device " + device +
                      ": this build has no cuda compute backend (configure with "
                      "-DTESSERA_WITH_CUDA=ON on a machine with the CUDA toolkit and cuDNN)");
  compute::BackendOptions options;
  options.num_threads = 1;
  options.device = index;
  options.tf32 = tf32;
  Gpu g;
  g.backend = registry.create("cuda", options);  // Unsupported without a visible device
  g.memory = g.backend->device_memory();
  TESSERA_CHECK(g.memory != nullptr, who, ": compute backend cuda reports no device memory");
  g.allocator = std::make_shared<core::Allocator>(who, g.memory);
  g.description = g.memory->describe();
  return g;
}

int calls_per_batch(double call_ms, double min_batch_ms) {
  if (!(call_ms > 0)) return kMaxCallsPerBatch;  // zero, negative or NaN: as short as can be
  const double n = std::ceil(min_batch_ms / call_ms);
  return n < 1 ? 1 : n > kMaxCallsPerBatch ? kMaxCallsPerBatch : int(n);
}

#ifdef TESSERA_BENCH_HAVE_CUDA_BACKEND
namespace {

void cuda_check(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw BackendError("cuda", int(e),
                       std::string("bench: ") + call + " failed: " + cudaGetErrorString(e));
}

}  // namespace

StreamTimer::StreamTimer(compute::Backend& be) {
  auto* cd = dynamic_cast<compute::cuda::CudaDevice*>(&be);
  if (!cd)
    throw Unsupported("bench: StreamTimer times the cuda compute backend's stream; backend " +
                      std::string(be.name()) + " has none");
  stream_ = cd->compute_stream();
  device_ = cd->device();
  // The events belong to the stream's device (this thread's current device when created).
  cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  cudaEvent_t a = nullptr, b = nullptr;
  cuda_check(cudaEventCreate(&a), "cudaEventCreate");
  start_ = a;
  cuda_check(cudaEventCreate(&b), "cudaEventCreate");
  stop_ = b;
}

StreamTimer::~StreamTimer() {
  if (start_) cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  if (stop_) cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void StreamTimer::start() {
  cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  cuda_check(cudaEventRecord(static_cast<cudaEvent_t>(start_), static_cast<cudaStream_t>(stream_)),
             "cudaEventRecord");
}

double StreamTimer::stop_ms() {
  cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  cuda_check(cudaEventRecord(static_cast<cudaEvent_t>(stop_), static_cast<cudaStream_t>(stream_)),
             "cudaEventRecord");
  cuda_check(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)), "cudaEventSynchronize");
  float ms = 0;
  cuda_check(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)),
      "cudaEventElapsedTime");
  return double(ms);
}
#else
StreamTimer::StreamTimer(compute::Backend& be) {
  throw Unsupported(
      "bench: StreamTimer needs the cuda compute backend, and this bench was built "
      "without it (backend " +
      std::string(be.name()) + ")");
}
StreamTimer::~StreamTimer() = default;
void StreamTimer::start() {}
double StreamTimer::stop_ms() { return 0; }
#endif

CopyBandwidth measure_copy_bandwidth(Gpu& gpu, double bytes, int reps, double min_batch_ms) {
  const auto n = static_cast<std::int64_t>(bytes / sizeof(float));
  core::Tensor src = core::Tensor::empty({n}, core::DType::F32, core::MemCategory::Workspace,
                                         gpu.allocator);
  core::Tensor dst = core::Tensor::empty({n}, core::DType::F32, core::MemCategory::Workspace,
                                         gpu.allocator);
  src.fill(1.0);
  CopyBandwidth c;
  c.bytes = double(n) * sizeof(float);
  c.per_copy = time_batched_ms(*gpu.backend, 2, reps, min_batch_ms, [&] { dst.copy_from(src); });
  c.bytes_per_s = c.per_copy.ms.median > 0 ? 2.0 * c.bytes / (c.per_copy.ms.median * 1e-3) : 0;
  return c;
}

PeerCommand default_peer_command() {
  PeerCommand c;
  c.script = TESSERA_BENCH_TORCH_GPU_PEER;
  if (const char* s = std::getenv("TESSERA_TORCH_GPU_PEER"); s && *s) c.script = s;
  if (const char* p = std::getenv("TESSERA_PYTHON"); p && *p) c.python = p;
  return c;
}

namespace {

/// `s` quoted for /bin/sh (single quotes; an embedded quote as '\'').
std::string sh_quote(const std::string& s) {
  std::string o = "'";
  for (char ch : s) {
    if (ch == '\'') o += "'\\''";
    else o += ch;
  }
  return o + "'";
}

}  // namespace

Peer run_torch_peer(const PeerCommand& cmd, const std::vector<std::string>& args) {
  Peer p;
  std::string line = sh_quote(cmd.python) + " " + sh_quote(cmd.script) + " --json";
  for (const std::string& a : args) {
    line += ' ';
    line += sh_quote(a);
  }
  line += " </dev/null";
  std::fflush(nullptr);
  FILE* f = ::popen(line.c_str(), "r");
  if (!f) {
    p.error = "could not start '" + line + "'";
    return p;
  }
  std::string out;
  char buf[4096];
  for (std::size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, got);
  const int status = ::pclose(f);
  const int rc = status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  const std::string last = out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  try {
    p.result = nlohmann::json::parse(last);
  } catch (const std::exception&) {
    p.error = cmd.script + " (run with " + cmd.python + ") exited with status " +
              std::to_string(rc) + " and printed no JSON" +
              (rc == 127 ? " (interpreter or script not found: --python, --peer-script)" : "");
    return p;
  }
  if (!p.result.is_object()) {
    p.error = cmd.script + " printed JSON that is not an object";
  } else if (p.result.contains("error")) {
    p.error = p.result["error"].is_string() ? p.result["error"].get<std::string>() : p.result["error"].dump();
  } else if (rc != 0) {
    p.error = cmd.script + " exited with status " + std::to_string(rc);
  } else if (!p.result.contains("step_ms_median") || !p.result["step_ms_median"].is_number()) {
    p.error = cmd.script + " printed no step_ms_median";
  } else {
    p.ok = true;
  }
  return p;
}

std::string peer_json(const Peer& p) {
  if (p.ok) return p.result.dump();
  nlohmann::json j = p.result.is_object() ? p.result : nlohmann::json::object();
  j["error"] = p.error;
  return j.dump();
}

std::string json_text(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return "?";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

std::string ratio_text(double a, double b) {
  if (!(b > 0)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", a / b);
  return buf;
}

}  // namespace tessera::bench
