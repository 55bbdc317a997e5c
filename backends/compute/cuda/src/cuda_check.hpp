// TESSERA_CUDA_CHECK / TESSERA_CUDNN_CHECK / TESSERA_CUBLAS_CHECK: every vendor call of the cuda
// backend is wrapped, and a failure becomes tessera::BackendError("cuda"|"cudnn"|"cublas", code,
// "<call> failed at file:line: <error string>").
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "tessera/core/error.hpp"

namespace tessera::compute::cuda {

[[noreturn]] void throw_cuda(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn(cudnnStatus_t s, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line);

/// For destructors (which never throw): logs a failing call to stderr and carries on.
void warn_cuda(cudaError_t e, const char* call, const char* file, int line) noexcept;

}  // namespace tessera::compute::cuda

#define TESSERA_CUDA_CHECK(call)                                                   \
  do {                                                                             \
    const cudaError_t tessera_e_ = (call);                                         \
    if (tessera_e_ != cudaSuccess)                                                 \
      ::tessera::compute::cuda::throw_cuda(tessera_e_, #call, __FILE__, __LINE__); \
  } while (0)

#define TESSERA_CUDNN_CHECK(call)                                                   \
  do {                                                                              \
    const cudnnStatus_t tessera_s_ = (call);                                        \
    if (tessera_s_ != CUDNN_STATUS_SUCCESS)                                         \
      ::tessera::compute::cuda::throw_cudnn(tessera_s_, #call, __FILE__, __LINE__); \
  } while (0)

#define TESSERA_CUBLAS_CHECK(call)                                                   \
  do {                                                                               \
    const cublasStatus_t tessera_s_ = (call);                                        \
    if (tessera_s_ != CUBLAS_STATUS_SUCCESS)                                         \
      ::tessera::compute::cuda::throw_cublas(tessera_s_, #call, __FILE__, __LINE__); \
  } while (0)

/// In destructors: a failure is printed, never thrown.
#define TESSERA_CUDA_WARN(call) \
  ::tessera::compute::cuda::warn_cuda((call), #call, __FILE__, __LINE__)
