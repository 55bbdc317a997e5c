// Pointwise (1×1) convolution as GEMM through Eigen, threads split over pixel blocks.
#pragma once

#include "conv_common.hpp"

namespace tessera::compute::cpu {

/// True when the pointwise kernels apply: 1×1 kernel, stride 1, no padding and an output the size
/// of the input (any groups, any dilation).
bool pointwise_applies(const Conv2dParams& p, const ConvDims& d);

/// Pixels per forward/backward-data task. The GEMM writes a contiguous per-worker block that is
/// then copied out row by row: the planes of a large image are a power of two apart, and a GEMM
/// writing straight into them would map all its rows onto the same cache sets. The 16-bit path
/// (conv_half.cpp) uses the same blocks, so its GEMMs are the f32 path's, bit for bit.
inline constexpr int kPointwisePixelBlock = 256;

/// Per sample and group: Y[Cout/g, HW] = W[Cout/g, Cin/g] · X[Cin/g, HW] (+ bias). Views must
/// have contiguous planes (sh == W); tasks are (sample, block of pixels), each a single-threaded
/// Eigen GEMM.
template <class T>
void pointwise_forward(const ConvContext& c, PlaneView<const T> x, const T* w, const T* bias,
                       PlaneView<T> y);

/// dX (+)= Wᵀ · dY per sample, group and pixel block.
template <class T>
void pointwise_backward_data(const ConvContext& c, PlaneView<const T> dy, const T* w,
                             PlaneView<T> dx, bool accumulate);

/// dW (+)= Σ_n dY · Xᵀ, db (+)= Σ dY (db may be null): each of the pool's threads sums its own
/// contiguous range of (sample, pixel) columns into a partial, then the partials are added in
/// thread order (bit-identical results for a given thread count).
template <class T>
void pointwise_backward_weight(const ConvContext& c, PlaneView<const T> x, PlaneView<const T> dy,
                               T* dw, T* db, bool accumulate);

}  // namespace tessera::compute::cpu
