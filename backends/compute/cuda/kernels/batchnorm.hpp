// Batch norm over dim 1 of (N, C, P…) views: channel_moments (Σx, Σx² per channel into f64),
// batchnorm_forward (y = (x − mean)·(rstd·γ) + β), batchnorm_backward_reduce (Σdy and Σdy·x̂ per
// channel into f64) and batchnorm_backward_data (dx = γ·rstd·(dy − Σdy/count − x̂·Σdy·x̂/count)),
// with the cpu backend's roundings. The sums run through reduce.hpp (fixed order, double); the
// elementwise passes take one item per element, row-major. All memory-bound: the reductions read 1
// (moments) or 2 elements per element, forward moves 2, backward_data 3: each should reach ≥ 80%
// of the GPU's copy bandwidth.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hd.hpp"
#include "reduce.hpp"
#include "view.hpp"

namespace tessera::compute::cuda::kernels {

/// Stores K = 2 row totals into two f64 channel vectors (the second scaled by `scale2[c]` when
/// that is set: Σdy·x̂ = rstd·Σdy·(x − mean)).
template <class T>
struct Moments2Store {
  View<double> a, b;
  View<const T> scale2;  // data null: none
  TESSERA_HD void store(std::int64_t c, const double* v) const {
    a.vec(c) = v[0];
    b.vec(c) = scale2.data ? v[1] * double(scale2.vec(c)) : v[1];
  }
};

// ---- channel_moments -----------------------------------------------------------------------
template <class T>
struct MomentsSrc {
  View<const T> x;
  TESSERA_HD void add(std::int64_t n, std::int64_t c, std::int64_t p, double* acc) const {
    const double v = double(x.ncp(n, c, p));
    acc[0] += v;
    acc[1] += v * v;
  }
};
template <class T>
struct ChannelMomentsParams {
  View<const T> x;
  View<double> sum, sumsq;
};
inline RowSpace channel_space(const auto& x) {
  return {x.shape[0], x.shape[1], x.numel_from(2), false};
}
template <class T>
std::size_t workspace_bytes(const ChannelMomentsParams<T>& q) {
  return row_reduce_bytes<2>(channel_space(q.x));
}
template <class L, class T>
void run_channel_moments(L& l, const ChannelMomentsParams<T>& q) {
  void* ws = l.workspace(workspace_bytes(q));
  run_row_reduce<2>(l, channel_space(q.x), MomentsSrc<T>{q.x}, Moments2Store<T>{q.sum, q.sumsq, {}},
                    ws);
}

// ---- batchnorm_forward ---------------------------------------------------------------------
template <class T>
struct BatchNormForwardParams {
  View<const T> x, mean, rstd, gamma, beta;
  View<T> y;
  std::int64_t c, p;
};
template <class T>
struct BatchNormForwardBody {
  static TESSERA_HD void run(const BatchNormForwardParams<T>& q, std::int64_t i) {
    const std::int64_t pl = k_div(i, q.p), c = pl - k_div(pl, q.c) * q.c;
    const T a = T(double(q.rstd.vec(c)) * double(q.gamma.vec(c)));
    q.y.at(i) = (q.x.at(i) - q.mean.vec(c)) * a + q.beta.vec(c);
  }
};
template <class L, class T>
void run_batchnorm_forward(L& l, BatchNormForwardParams<T> q) {
  const std::int64_t n = q.x.numel();
  if (n == 0) return;
  q.c = q.x.shape[1];
  q.p = q.x.numel_from(2);
  coalesce(q.x, q.y);
  l.template pass<BatchNormForwardBody<T>>(q, n);
}

// ---- batchnorm_backward_reduce -------------------------------------------------------------
template <class T>
struct BnBackwardSrc {
  View<const T> dy, x, mean;
  TESSERA_HD void add(std::int64_t n, std::int64_t c, std::int64_t p, double* acc) const {
    const double g = double(dy.ncp(n, c, p));
    acc[0] += g;
    acc[1] += g * (double(x.ncp(n, c, p)) - double(mean.vec(c)));
  }
};
template <class T>
struct BatchNormBackwardReduceParams {
  View<const T> dy, x, mean, rstd;
  View<double> sum_dy, sum_dy_xhat;
};
template <class T>
std::size_t workspace_bytes(const BatchNormBackwardReduceParams<T>& q) {
  return row_reduce_bytes<2>(channel_space(q.x));
}
template <class L, class T>
void run_batchnorm_backward_reduce(L& l, const BatchNormBackwardReduceParams<T>& q) {
  void* ws = l.workspace(workspace_bytes(q));
  run_row_reduce<2>(l, channel_space(q.x), BnBackwardSrc<T>{q.dy, q.x, q.mean},
                    Moments2Store<T>{q.sum_dy, q.sum_dy_xhat, q.rstd}, ws);
}

// ---- batchnorm_backward_data ---------------------------------------------------------------
template <class T>
struct BatchNormBackwardDataParams {
  View<const T> dy, x, mean, rstd, gamma;
  View<const double> sum_dy, sum_dy_xhat;
  View<T> dx;
  double count;
  std::int64_t c, p;
};
template <class T>
struct BatchNormBackwardDataBody {
  static TESSERA_HD void run(const BatchNormBackwardDataParams<T>& q, std::int64_t i) {
    const std::int64_t pl = k_div(i, q.p), c = pl - k_div(pl, q.c) * q.c;
    // dx = k1·(dy − k0 − (x − mean)·k2), the constants rounded to T as on the cpu backend.
    const double r = double(q.rstd.vec(c));
    const T k0 = T(q.sum_dy.vec(c) / q.count), k1 = T(double(q.gamma.vec(c)) * r),
            k2 = T(r * q.sum_dy_xhat.vec(c) / q.count);
    const T t = q.dy.at(i) - k0 - (q.x.at(i) - q.mean.vec(c)) * k2;
    q.dx.at(i) = t * k1;
  }
};
template <class L, class T>
void run_batchnorm_backward_data(L& l, BatchNormBackwardDataParams<T> q) {
  const std::int64_t n = q.x.numel();
  if (n == 0) return;
  q.c = q.x.shape[1];
  q.p = q.x.numel_from(2);
  coalesce(q.dy, q.x, q.dx);
  l.template pass<BatchNormBackwardDataBody<T>>(q, n);
}

}  // namespace tessera::compute::cuda::kernels
