// The CUDA copier of the ucx plugin's staging (see cuda_staging.hpp): pinned host blocks, and
// every copy between them and the device on the group's staging stream. Core's decorator
// (tessera/comm/device_staging.hpp) keeps the pool and runs the calls.
#include "cuda_staging.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/error.hpp"

namespace tessera::comm {

namespace {

/// BackendError's code for a failed CUDA call (the message names the call and CUDA's error).
constexpr int kCudaFailure = 3;

std::string cuda_text(cudaError_t e) {
  return detail::cat(cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

/// Throws BackendError ("<where>: <what> (<bytes> bytes, <call>) failed: <error>") unless `e` is
/// cudaSuccess.
void check_cuda(cudaError_t e, const StagingSite& site, const char* what, std::size_t bytes,
                const char* call) {
  if (e == cudaSuccess) return;
  throw BackendError(std::string(site.backend), kCudaFailure,
                     detail::cat(site.what, ": ", what, " (", bytes, " bytes, ", call,
                                 ") failed: ", cuda_text(e)));
}

/// One group's CUDA side: its staging stream and pinned blocks (allocated here, kept for reuse by
/// core's pool, which frees them with the group).
class CudaCopier final : public StagingCopier {
 public:
  CudaCopier() = default;
  CudaCopier(const CudaCopier&) = delete;
  CudaCopier& operator=(const CudaCopier&) = delete;
  ~CudaCopier() override {
    if (stream_) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }

  std::unique_ptr<StagingCopier> for_sub_group() const override {
    return std::make_unique<CudaCopier>();
  }

  /// The pointer is CUDA device or managed memory; the staging stream exists (created here, so a
  /// call fails on it before taking a block).
  void check(const BufferView& v, const StagingSite& site) override {
    check_device_pointer(v.data, site);
    stream(site);
  }

  /// Pinned, rounded up to 64 KiB (cudaHostAllocPortable: usable from any device).
  void* allocate_host(std::size_t bytes, std::size_t& got, const StagingSite& site) override {
    got = (std::max<std::size_t>(bytes, 1) + kRound - 1) / kRound * kRound;
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, got, cudaHostAllocPortable);
    if (e != cudaSuccess)
      throw BackendError(std::string(site.backend), kCudaFailure,
                         detail::cat(site.what, ": cudaHostAlloc of ", got,
                                     " bytes for staging failed: ", cuda_text(e)));
    return p;
  }
  void free_host(void* p) noexcept override {
    // cudaFreeHost synchronises the device first: no staging copy still reads or writes the block.
    cudaFreeHost(p);
  }

  /// Copied on the staging stream, which the host made wait for the work that produced `v` (or
  /// which follows the legacy default stream's work, for a raw buffer), then synchronised: the
  /// bytes are on the host when this returns.
  void to_host(void* host, const BufferView& v, const StagingSite& site) override {
    const cudaStream_t s = stream(site);
    check_cuda(cudaMemcpyAsync(host, v.data, v.bytes(), cudaMemcpyDeviceToHost, s), site,
               "staging the input", v.bytes(), "cudaMemcpyAsync device to host");
    check_cuda(cudaStreamSynchronize(s), site, "staging the input", v.bytes(),
               "cudaStreamSynchronize of the staging stream");
  }

  /// The results go to the device on the staging stream, which waited (at the call) for the
  /// compute work issued before the call, so they land after every kernel that read the buffers
  /// before; the stream is then synchronised, so the data is in place (and the pinned blocks are
  /// free again) when this returns, before the caller's next compute is issued.
  void to_device(const std::vector<StagedOutput>& outputs, const StagingSite& site) override {
    const cudaStream_t s = stream(site);
    std::size_t bytes = 0;
    for (const StagedOutput& o : outputs) {
      const std::size_t n = o.device.bytes();
      check_cuda(cudaMemcpyAsync(o.device.data, o.host, n, cudaMemcpyHostToDevice, s), site,
                 "copying the result back to the device", n, "cudaMemcpyAsync host to device");
      bytes += n;
    }
    check_cuda(cudaStreamSynchronize(s), site, "copying the results back to the device", bytes,
               "cudaStreamSynchronize of the staging stream");
  }

  /// The stream if it exists or can be made, else null (for the exported query, which never
  /// throws).
  cudaStream_t stream_or_null() noexcept {
    try {
      const std::string what = "staging stream";
      return stream({"ucx", what});
    } catch (...) {
      return nullptr;
    }
  }

 private:
  static constexpr std::size_t kRound = 64 * 1024;

  /// The staging stream, created on the calling thread's current device at the first CUDA buffer
  /// (a process that passes none never initialises CUDA here). A *blocking* stream, so a copy is
  /// also ordered after work on the legacy default stream (a raw buffer filled by cudaMemcpy);
  /// work on non-blocking streams (the cuda compute backend's) is ordered by the host, which makes
  /// this stream wait for it before each call (tessera_comm_plugin_v1_stream). Copies may use it
  /// whatever the current device is (CUDA allows a copy on another device's stream).
  cudaStream_t stream(const StagingSite& site) {
    if (stream_) return stream_;
    const cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamDefault);
    if (e != cudaSuccess) {
      stream_ = nullptr;
      cudaGetLastError();  // not sticky: says nothing about later calls
      throw BackendError(
          std::string(site.backend), kCudaFailure,
          detail::cat(
              site.what,
              ": creating the staging stream (cudaStreamCreateWithFlags) failed: ", cuda_text(e)));
    }
    return stream_;
  }

  static void check_device_pointer(const void* p, const StagingSite& site) {
    if (!p)
      throw InvalidArgument(detail::cat(site.backend, ": ", site.what,
                                        ": a CUDA buffer of non-zero count has a null pointer"));
    cudaPointerAttributes a{};
    const cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
        e == cudaErrorInitializationError || e == cudaErrorCudartUnloading)
      throw BackendError(
          std::string(site.backend), kCudaFailure,
          detail::cat(
              site.what,
              ": a CUDA buffer was passed but CUDA is not usable in this process: ", cuda_text(e)));
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw InvalidArgument(
          detail::cat(site.backend, ": ", site.what,
                      ": the buffer is marked MemorySpace::Cuda but CUDA does not know it (",
                      cuda_text(e), ")"));
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
      throw InvalidArgument(
          detail::cat(site.backend, ": ", site.what,
                      ": the buffer is marked MemorySpace::Cuda but is host memory; pass "
                      "a cudaMalloc'ed pointer, or mark it MemorySpace::Host"));
  }

  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> stage_cuda_through_host(std::unique_ptr<Backend> host_only) {
  TESSERA_CHECK(host_only != nullptr, "stage_cuda_through_host: no backend given");
  return stage_device_buffers(std::move(host_only), std::make_unique<CudaCopier>());
}

void* staging_stream(Backend& b) noexcept {
  auto* copier = dynamic_cast<CudaCopier*>(staging_copier(b));
  return copier ? static_cast<void*>(copier->stream_or_null()) : nullptr;
}

}  // namespace tessera::comm
