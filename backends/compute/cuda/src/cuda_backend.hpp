// CudaBackend: the "cuda" compute backend — one device, its memory (streams and pool), cuDNN and
// cuBLAS handles on the compute stream, and the routing of every op of the table.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include <memory>

#include "conv_cudnn.hpp"
#include "cuda_memory.hpp"
#include "linear_cublas.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/compute/cuda.hpp"
#include "workspace.hpp"

namespace tessera::compute::cuda {

/// One rank's kernels on one CUDA device. Everything is enqueued on the compute stream and returns
/// without waiting for the device (copies into host memory and reading results aside).
class CudaBackend final : public compute::Backend, public CudaDevice {
 public:
  /// Throws Unsupported without a visible device, InvalidArgument for options.device out of range.
  explicit CudaBackend(const BackendOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const noexcept override { return "cuda"; }
  /// Host threads are not what a GPU backend scales with: always 1; set_num_threads is accepted.
  int num_threads() const noexcept override { return 1; }
  void set_num_threads(int) override {}
  /// rounds_master_to_call_dtype: a 16-bit convolution or linear rounds an f32 weight and bias to
  /// the call's dtype for the tensor cores, and cuDNN returns a convolution's dw/db in the call's
  /// dtype (README.md, "Mixed precision").
  Capabilities capabilities() const noexcept override {
    return {.rounds_master_to_call_dtype = true};
  }
  void execute(const OpCall& call) override;
  std::shared_ptr<core::DeviceMemory> device_memory() override { return memory_; }
  /// Waits for both streams.
  void synchronize() override { memory_->synchronize(); }

  int device() const noexcept override { return memory_->device(); }
  void* compute_stream() const noexcept override { return memory_->compute_stream(); }
  void* comm_stream() const noexcept override { return memory_->comm_stream(); }
  void comm_waits_for_compute() override;
  void compute_waits_for_comm() override;
  bool tf32() const noexcept override { return tf32_; }
  void set_workspace_allocator(std::shared_ptr<core::Allocator> a) override;
  const std::shared_ptr<core::Allocator>& workspace_allocator() const noexcept override {
    return workspace_alloc_;
  }

  std::size_t cached_conv_algorithms() const noexcept override { return conv_.cached_algorithms(); }

 private:
  std::shared_ptr<CudaMemory> memory_;
  std::shared_ptr<core::Allocator> workspace_alloc_;
  bool tf32_ = false;
  cudaEvent_t compute_done_ = nullptr, comm_done_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  CudnnConv conv_;
  CublasLinear linear_;
};

/// "" when a CUDA device is visible, else "no CUDA device visible (cudaGetDeviceCount: ...)".
std::string probe_devices();

}  // namespace tessera::compute::cuda
