// Dense k×k convolution (any stride, padding, dilation, groups) as im2col + Eigen GEMM.
#pragma once

#include "conv_common.hpp"

namespace tessera::compute::cpu {

/// y = conv(x, w) + bias: per task (sample, block of output pixels) and group, the columns
/// col[(ci,i,j), pixel] of x are gathered into per-worker workspace and Y_g = W_g · col.
/// y must have contiguous planes (sh == Wo); x any PlaneView.
template <class T>
void im2col_forward(const ConvContext& c, PlaneView<const T> x, const T* w, const T* bias,
                    PlaneView<T> y);

/// dx (+)= col2im(W_gᵀ · dY_g) over blocks of whole output rows. Blocks are processed in two
/// waves (even, then odd) whose input footprints do not overlap within a wave, so tasks never
/// write the same dx element concurrently and the sum order is fixed (deterministic for any
/// thread count). dy must have contiguous planes.
template <class T>
void im2col_backward_data(const ConvContext& c, PlaneView<const T> dy, const T* w, PlaneView<T> dx,
                          bool accumulate);

/// dw (+)= Σ dY_g · colᵀ and db (+)= Σ dY (db may be null): each thread sums a fixed range of
/// (sample, pixel block) items into its partial; partials are added in thread order.
template <class T>
void im2col_backward_weight(const ConvContext& c, PlaneView<const T> x, PlaneView<const T> dy,
                            T* dw, T* db, bool accumulate);

namespace detail {

/// Workspace elements a column block may use (cache-sized; a block holds at least one row).
inline constexpr std::int64_t kColBudgetElems = 256 * 1024;

/// col (K × np, K = Cin/g·kh·kw, row k = (ci·kh + i)·kw + j) of sample n, group g and output
/// pixels [p0, p0 + np) (row-major pixel index oh·Wo + ow); zero where the tap reads padding.
template <class T>
void fill_col(const Conv2dParams& p, const ConvDims& d, PlaneView<const T> x, int n, int g, int p0,
              int np, T* col);

/// The adjoint of fill_col: dx[...] += col[...] for every tap that reads inside x.
template <class T>
void col2im_add(const Conv2dParams& p, const ConvDims& d, const T* col, int n, int g, int p0,
                int np, PlaneView<T> dx);

/// Output pixels per column block for a K-row column matrix.
inline int col_block_pixels(int k, const ConvDims& d, int threads) {
  const int fit = static_cast<int>(std::max<std::int64_t>(kColBudgetElems / std::max(k, 1), 64));
  return split_rows(fit, d.ho * d.wo, d.n, threads);
}

}  // namespace detail

}  // namespace tessera::compute::cpu
