// The cuda compute backend's public face: what other layers (the NCCL plugin, the run layer) may
// ask of it, its plugin entry point, and the loader that registers it. Includes no CUDA header.
#pragma once

#include <memory>
#include <string>

#include "tessera/compute/backend.hpp"

namespace tessera::compute::cuda {

/// Implemented by the cuda backend next to compute::Backend; reach it with
/// dynamic_cast<cuda::CudaDevice*>(&backend). Streams are cudaStream_t passed as void*.
class CudaDevice {
 public:
  virtual ~CudaDevice() = default;
  /// The CUDA device ordinal the backend runs on.
  virtual int device() const noexcept = 0;
  /// The stream every kernel, library call, copy and allocation of the backend is ordered on.
  virtual void* compute_stream() const noexcept = 0;
  /// The stream for communication (NCCL, halo transfers); non-blocking like the compute stream.
  virtual void* comm_stream() const noexcept = 0;
  /// Makes work enqueued on the communication stream from now on wait for everything enqueued on
  /// the compute stream so far (an event recorded on one, waited on by the other; no host wait).
  virtual void comm_waits_for_compute() = 0;
  /// The reverse: later compute work waits for the communication enqueued so far.
  virtual void compute_waits_for_comm() = 0;
  /// Whether f32 convolutions and matrix products may use TF32 tensor cores (BackendOptions::tf32).
  virtual bool tf32() const noexcept = 0;
  /// Books the backend's workspaces (library workspaces, padded frames, kernel partial sums) in
  /// `a`, an allocator over this backend's device_memory() (the rank's allocator, so its
  /// Workspace figures include them). Until called, the backend books them in an allocator of
  /// its own (workspace_allocator()). InvalidArgument for an allocator over other memory.
  virtual void set_workspace_allocator(std::shared_ptr<core::Allocator> a) = 0;
  virtual const std::shared_ptr<core::Allocator>& workspace_allocator() const noexcept = 0;
  /// Convolution geometries whose cuDNN algorithm has been chosen (each is chosen once, then
  /// cached for the life of the backend).
  virtual std::size_t cached_conv_algorithms() const noexcept = 0;
};

/// The plugin's one exported entry point, looked up with dlsym(kEntrySymbol). The library is built
/// in the same tree with the same compiler as its host (the table holds C++ types).
inline constexpr int kPluginApiV1 = 1;
inline constexpr const char* kEntrySymbol = "tessera_compute_cuda_v1";
inline constexpr const char* kLibraryFile = "libtessera_compute_cuda.so";

struct PluginV1 {
  int api_version = kPluginApiV1;
  /// "" when a CUDA device is visible, else why not ("no CUDA device visible (cudaGetDeviceCount:
  /// ...)"). Initialises the CUDA runtime: never call it before a fork.
  std::string (*probe)() = nullptr;
  /// Creates a backend on options.device; throws Unsupported without a usable device,
  /// InvalidArgument for a device index out of range, BackendError for a failing CUDA call.
  std::unique_ptr<compute::Backend> (*create)(const BackendOptions& options) = nullptr;
};
using PluginV1Fn = const PluginV1* (*)();

/// The library's optional second export: the loader hands it the host's core::report, since the
/// library links its own copy of core, whose report sink no front end sets (level 0 info, 1
/// warning).
inline constexpr const char* kReportSymbol = "tessera_compute_cuda_v1_report";
using ReportFn = void (*)(int level, const char* message);
using SetReportFn = void (*)(ReportFn host_report);

/// Host-side loader (no CUDA): finds libtessera_compute_cuda.so on tessera::plugin_search_path()
/// and opens it once per process (kept open until exit). Throws Unsupported naming the folders
/// searched, or the dlopen error, when the library cannot be loaded.
const PluginV1& load_plugin();

/// The factory registered as "cuda": loads the plugin on first use, then creates the backend.
std::unique_ptr<compute::Backend> create(const BackendOptions& options);

/// Why the cuda backend cannot run here ("" when it can): a library that does not load, or the
/// plugin's probe. For `tessera backends`; initialises CUDA (not before a fork).
std::string why_unusable();

/// Whether libtessera_compute_cuda.so was found and opened (its entry point checked), whatever
/// its probe says of the devices. Loads it on the first call, as load_plugin() does.
bool plugin_loaded();

}  // namespace tessera::compute::cuda
