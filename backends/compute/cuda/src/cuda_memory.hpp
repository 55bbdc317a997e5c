// CudaMemory: the device memory of one cuda backend (core::DeviceMemory) — its device, its two
// streams, a caching stream-ordered pool (cudaMallocFromPoolAsync on the compute stream), and the
// value operations core calls on device tensors (copy, add, fill).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::compute::cuda {

/// Owns the streams and the pool, so tensors (which keep their memory alive) may outlive the
/// backend that made them. Thread-compatible like the backend: one rank's thread at a time; upload (a
/// loader thread's) may run beside it.
class CudaMemory final : public core::DeviceMemory {
 public:
  /// Creates the streams and the pool on `device` (which must exist).
  explicit CudaMemory(int device);
  ~CudaMemory() override;
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  core::MemorySpace space() const noexcept override { return core::MemorySpace::Cuda; }
  /// "cuda:0 (NVIDIA H200, 139 GiB)".
  std::string describe() const override { return describe_; }
  /// Stream-ordered on the compute stream (usable by work enqueued there afterwards; other streams
  /// must wait for it). A failing request trims the pool's cache once and retries, then throws
  /// OutOfMemory with the request, the pool's reserved bytes and the device's free/total.
  void* allocate(std::size_t bytes) override;
  /// Stream-ordered free on the compute stream: work already enqueued there may still use it; work
  /// on the communication stream that uses it must be joined (compute_waits_for_comm) first.
  void deallocate(void* p, std::size_t bytes) noexcept override;
  /// The pool's cudaMemPoolAttrReservedMemCurrent / ...High (cached blocks included).
  std::size_t reserved_bytes() const override;
  std::size_t peak_reserved_bytes() const override;
  void copy(const core::Tensor& dst, const core::Tensor& src) override;
  void add(const core::Tensor& dst, const core::Tensor& src) override;
  void fill(const core::Tensor& dst, double value) override;
  void synchronize() override;
  /// An event recorded on the compute stream now, waited on by `stream` (cudaStreamWaitEvent; any
  /// device): `stream`'s later work runs after everything enqueued on the compute stream so far.
  /// The upload stream needs no event (upload returns when its copy is done). False for null.
  bool stream_waits_for_issued(void* stream) override;
  /// `bytes` from src to dst, each a host or a device pointer of this process (cudaMemcpyDefault),
  /// on the compute stream; returns when the data is there if dst is host memory.
  void copy_bytes(void* dst, const void* src, std::size_t bytes) override;
  /// cudaHostRegister (portable); false, with the error cleared, where the driver refuses.
  bool pin_host(void* p, std::size_t bytes) override;
  void unpin_host(void* p) noexcept override;
  /// On the upload stream: waits for an event recorded on the compute stream at the call, copies,
  /// and synchronises the upload stream only (the calling thread waits, the rank's kernels run on).
  void upload(void* dst, const void* src, std::size_t bytes) override;

  int device() const noexcept { return device_; }
  /// The device's streaming multiprocessors (kernel grids are sized by it).
  int sm_count() const noexcept { return sm_count_; }
  cudaStream_t compute_stream() const noexcept { return compute_; }
  cudaStream_t comm_stream() const noexcept { return comm_; }
  /// Makes this thread's current device the backend's (every entry point calls it first).
  void make_current() const;
  /// Whether `t`'s data lives on a CUDA device (else host memory).
  static bool on_device(const core::Tensor& t);

 private:
  void copy_to_device(const core::Tensor& dst, const core::Tensor& src);
  void copy_to_host(const core::Tensor& dst, const core::Tensor& src);
  /// dst = src with both on this device, any strides (the copy kernel).
  void device_copy(const core::Tensor& dst, const core::Tensor& src);

  int device_ = 0;
  int sm_count_ = 1;
  std::string describe_;
  cudaStream_t compute_ = nullptr;
  cudaStream_t comm_ = nullptr;
  cudaStream_t upload_ = nullptr;  ///< host → device copies of a Loader's threads
  cudaMemPool_t pool_ = nullptr;
};

/// A contiguous device tensor of `shape` on `mem`'s pool, freed (stream-ordered) when the last
/// copy goes; booked nowhere and, to core, a host tensor (from_blob): only for the memory's own
/// staging, handed to its kernels by pointer (library workspaces go through Workspace).
core::Tensor device_scratch(CudaMemory& mem, core::Shape shape, core::DType dtype);

}  // namespace tessera::compute::cuda
