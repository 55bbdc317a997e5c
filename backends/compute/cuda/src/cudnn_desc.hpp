// RAII cuDNN descriptors of tessera tensors (strided NCHW tensors, packed filters, convolutions).
#pragma once

#include <cudnn.h>

#include "cuda_check.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::compute::cuda {

/// CUDNN_DATA_FLOAT / _DOUBLE / _BFLOAT16 / _HALF; Unsupported for other dtypes, naming `what`.
cudnnDataType_t cudnn_dtype(core::DType t, const char* what);

/// A 4-d tensor descriptor with t's shape and strides (any positive strides).
class TensorDesc {
 public:
  explicit TensorDesc(const core::Tensor& t);
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const noexcept { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

/// A packed NCHW filter descriptor (Cout, Cin/groups, kh, kw); w must be contiguous.
class FilterDesc {
 public:
  explicit FilterDesc(const core::Tensor& w);
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d_); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  cudnnFilterDescriptor_t get() const noexcept { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

/// A 2-d cross-correlation with the given padding (what cuDNN is told, see conv_window.hpp), the
/// call's stride, dilation and groups, for data of `dtype`, computing in its accumulate_dtype
/// (f32 for bf16/f16 data: cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16 configurations).
class ConvDesc {
 public:
  ConvDesc(const Conv2dParams& p, int pad_h, int pad_w, core::DType dtype);
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d_); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  cudnnConvolutionDescriptor_t get() const noexcept { return d_; }
  void set_math(cudnnMathType_t m) { TESSERA_CUDNN_CHECK(cudnnSetConvolutionMathType(d_, m)); }

 private:
  cudnnConvolutionDescriptor_t d_ = nullptr;
};

/// alpha/beta scalars of the call's dtype (cuDNN reads float for f32, bf16 and f16 data, double
/// for f64).
struct Scalars {
  float f[2];
  double d[2];
  bool is_double;
  Scalars(core::DType t, double alpha, double beta)
      : f{static_cast<float>(alpha), static_cast<float>(beta)},
        d{alpha, beta},
        is_double(t == core::DType::F64) {}
  const void* alpha() const { return is_double ? static_cast<const void*>(&d[0]) : &f[0]; }
  const void* beta() const { return is_double ? static_cast<const void*>(&d[1]) : &f[1]; }
};

}  // namespace tessera::compute::cuda
