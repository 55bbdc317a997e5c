// linear_forward / linear_backward through cuBLAS (cublasGemmEx; row-major matrices as their
// column-major transposes, strided rows through the leading dimension), f32 (TF32 only when
// allowed) and f64.
#pragma once

#include <cublas_v2.h>

#include "tessera/core/tensor.hpp"
#include "workspace.hpp"

namespace tessera::compute::cuda {

class CublasLinear {
 public:
  /// `handle` is bound to the compute stream.
  CublasLinear(cublasHandle_t handle, bool tf32) : handle_(handle), tf32_(tf32) {}

  /// y (M,N) = x (M,K) · wᵀ + bias.
  void forward(const Workspace& ws, const core::Tensor& x, const core::Tensor& w,
               const core::Tensor* bias, const core::Tensor& y);
  /// dx = dy·w (when dx), dw (+)= dyᵀ·x, db (+)= Σ_m dy (when db).
  void backward(const Workspace& ws, const core::Tensor& dy, const core::Tensor& x,
                const core::Tensor& w, const core::Tensor* dx, const core::Tensor& dw,
                const core::Tensor* db, bool accumulate);

 private:
  cublasHandle_t handle_;
  bool tf32_;
};

}  // namespace tessera::compute::cuda
