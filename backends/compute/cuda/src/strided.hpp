// A tensor as a kernel sees it: base pointer, dtype, shape and strides (elements) by value, so a
// __global__ function can take it as an argument; and the device memory's own kernels on it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tessera/core/tensor.hpp"

namespace tessera::compute::cuda {

inline constexpr int kMaxKernelDims = 8;

struct StridedView {
  void* data = nullptr;
  core::DType dtype = core::DType::F32;
  int ndim = 0;
  std::int64_t numel = 0;
  std::int64_t shape[kMaxKernelDims] = {};
  std::int64_t strides[kMaxKernelDims] = {};

  /// The element offset (in elements) of the i-th element in row-major index order.
  __host__ __device__ std::int64_t offset_of(std::int64_t i) const {
    std::int64_t off = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      off += (i % shape[d]) * strides[d];
      i /= shape[d];
    }
    return off;
  }
};

/// The view of `t`; throws Unsupported past kMaxKernelDims dimensions.
StridedView strided_view(const core::Tensor& t);

/// Sets every element of `v` to `value` (converted to its dtype) on `stream`.
void launch_fill(const StridedView& v, double value, cudaStream_t stream);
/// dst = src elementwise (same shape and dtype, any dtype, any strides; must not overlap).
void launch_copy(const StridedView& dst, const StridedView& src, cudaStream_t stream);
/// dst += src elementwise (f32 or f64; Unsupported otherwise).
void launch_add(const StridedView& dst, const StridedView& src, cudaStream_t stream);

}  // namespace tessera::compute::cuda
