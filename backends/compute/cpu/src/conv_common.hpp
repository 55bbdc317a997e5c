// Plumbing shared by the fast convolution paths: sizes, strided plane views, workspace, tasks.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tessera/compute/backend.hpp"
#include "tessera/core/tensor.hpp"
#include "thread_pool.hpp"

namespace tessera::compute::cpu {

/// Sizes of one conv call: x (n,cin,h,w), y (n,cout,ho,wo).
struct ConvDims {
  int n = 0, cin = 0, h = 0, w = 0, cout = 0, ho = 0, wo = 0;
};

/// An (N,C,H,W) tensor with unit W stride and arbitrary N, C, H strides (in elements): a
/// contiguous tensor or an H-, W- or C-narrowed view of one. T may be const.
template <class T>
struct PlaneView {
  T* data = nullptr;
  std::int64_t sn = 0, sc = 0, sh = 0;
  T* row(int n, int c, int h) const { return data + n * sn + c * sc + h * sh; }
  T* plane(int n, int c) const { return data + n * sn + c * sc; }
};

/// What every fast kernel gets besides its data: the geometry, the sizes, the threads and the
/// allocator that books its workspace (MemCategory::Workspace).
struct ConvContext {
  const Conv2dParams& p;
  ConvDims d;
  ThreadPool& pool;
  core::AllocatorPtr allocator;
  /// The activations' dtype where the kernel's storage type is std::uint16_t (BF16 or F16).
  core::DType half = core::DType::BF16;
};

/// The type a kernel computes in for activations stored as S: S itself for float and double,
/// float for 16-bit storage (std::uint16_t holding bf16 or f16 bits; ConvContext::half says which).
template <class S>
struct ComputeOf {
  using type = S;
};
template <>
struct ComputeOf<std::uint16_t> {
  using type = float;
};
template <class S>
using compute_t = typename ComputeOf<S>::type;

/// dst[0, n) = src[0, n) in the compute type: a copy, or widened from 16 bits (exact).
template <class S>
void load_row(const S* src, compute_t<S>* dst, std::int64_t n, core::DType half);
/// dst[0, n) = src[0, n) in the storage type: a copy, or rounded once to 16 bits.
template <class S>
void store_row(const compute_t<S>* src, S* dst, std::int64_t n, core::DType half);

/// A contiguous 1-d workspace of `count` elements of T, booked as Workspace.
template <class T>
core::Tensor workspace(const ConvContext& c, std::int64_t count) {
  return core::Tensor::empty({std::max<std::int64_t>(count, 1)}, core::dtype_of<T>,
                             core::MemCategory::Workspace, c.allocator);
}

/// Floor and ceiling of a / b for b > 0 and any sign of a.
inline int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
inline int ceil_div(int a, int b) { return -floor_div(-a, b); }

/// [lo, hi) of the output positions o (in [0, n_out)) that read input index o·s + off with
/// 0 ≤ o·s + off < n_in.
inline void valid_range(int n_out, int n_in, int s, int off, int& lo, int& hi) {
  lo = std::clamp(ceil_div(-off, s), 0, n_out);
  hi = std::clamp(floor_div(n_in - 1 - off, s) + 1, lo, n_out);
}

/// Rows (or pixels) per task: at most `fit` (what the scratch budget allows) and small enough
/// that `items` × ceil(total / rows) tasks give each of `threads` threads several tasks.
inline int split_rows(int fit, int total, int items, int threads) {
  int rows = std::max(fit, 1);
  const int want_tasks = 4 * threads;
  items = std::max(items, 1);
  if (threads > 1 && items < want_tasks)
    rows = std::min(rows, ceil_div(total, ceil_div(want_tasks, items)));
  return std::clamp(rows, 1, std::max(total, 1));
}

}  // namespace tessera::compute::cpu
