// Layer norm over dim 1 (channels) of (N, C, P…) views, for every pixel (n, p). Forward: one item
// per pixel walks its C channels twice (shifted sums in double: d = x − x[c=0], mean = x0 + Σd/C,
// var = Σd²/C − (Σd/C)²; then y = (x − mean)·rstd·γ + β). Backward: dγ = Σ dy·x̂, dβ = Σ dy per
// channel through reduce.hpp first (dx may alias dy), then one item per pixel: dx = rstd·(γ·dy −
// mean_c(γ·dy) − x̂·mean_c(γ·dy·x̂)). Consecutive items are consecutive pixels, so each channel
// step of a warp reads consecutive W elements. Memory-bound: forward reads x twice and writes y
// (3 elements per element, the second read often from L2), backward ~6: each should reach ≥ 70%
// of the GPU's copy bandwidth for P ≫ 1 (a 2-d (N,C) input has P = 1 and strided channel walks).
#pragma once

#include <cstddef>
#include <cstdint>

#include "half.hpp"
#include "hd.hpp"
#include "reduce.hpp"
#include "view.hpp"

namespace tessera::compute::cuda::kernels {

// T computes and holds the Master slots (gamma, beta, mean, rstd, dgamma, dbeta); S stores x, y,
// dy, dx (S = Bf16/F16 with T = float: loaded widened, stored rounded once).
template <class T, class S = T>
struct LayerNormForwardParams {
  View<const S> x;
  View<const T> gamma, beta;
  View<S> y;
  View<T> mean, rstd;  // mean, rstd: x's shape without dim 1
  double eps;
  std::int64_t c, p;
};
template <class T, class S>
struct LayerNormForwardBody {
  static TESSERA_HD void run(const LayerNormForwardParams<T, S>& q, std::int64_t item) {
    const std::int64_t n = k_div(item, q.p), p = item - n * q.p, C = q.c;
    const std::int64_t xo = n * q.x.stride[0] + q.x.offset_from(2, p), xs = q.x.stride[1];
    const double x0 = C > 0 ? double(convert<T>(q.x.data[xo])) : 0.0;
    double s1 = 0, s2 = 0;
    for (std::int64_t c = 0; c < C; ++c) {
      const double d = double(convert<T>(q.x.data[xo + c * xs])) - x0;
      s1 += d;
      s2 += d * d;
    }
    const double inv_c = C > 0 ? 1.0 / double(C) : 0.0;
    const double md = s1 * inv_c;
    const double var = k_max(0.0, s2 * inv_c - md * md);
    const T mean = T(x0 + md), rstd = T(1.0 / k_sqrt(var + q.eps));
    q.mean.at(item) = mean;
    q.rstd.at(item) = rstd;
    const std::int64_t yo = n * q.y.stride[0] + q.y.offset_from(2, p), ys = q.y.stride[1];
    for (std::int64_t c = 0; c < C; ++c) {
      const T v = (convert<T>(q.x.data[xo + c * xs]) - mean) * rstd;
      q.y.data[yo + c * ys] = convert<S>(v * q.gamma.vec(c) + q.beta.vec(c));
    }
  }
};
template <class L, class T, class S>
void run_layernorm_forward(L& l, LayerNormForwardParams<T, S> q) {
  q.c = q.x.shape[1];
  q.p = q.x.numel_from(2);
  l.template pass<LayerNormForwardBody<T, S>>(q, q.x.shape[0] * q.p);
}

// dγ and dβ: per-channel Σ dy·x̂ (x̂ rounded to T as in dx) and Σ dy.
template <class T, class S = T>
struct LayerNormGradSrc {
  View<const S> dy, x;
  View<const T> mean, rstd;
  std::int64_t p;  // pixels per sample (the index of mean/rstd is n·p + pixel)
  TESSERA_HD void add(std::int64_t n, std::int64_t c, std::int64_t px, double* acc) const {
    const std::int64_t s = n * p + px;
    const T d = convert<T>(dy.ncp(n, c, px));
    const T xh = (convert<T>(x.ncp(n, c, px)) - mean.at(s)) * rstd.at(s);
    acc[0] += double(d * xh);
    acc[1] += double(d);
  }
};
template <class T>
struct GammaBetaStore {
  View<T> dgamma, dbeta;
  bool accumulate;
  TESSERA_HD void store(std::int64_t c, const double* v) const {
    T& g = dgamma.vec(c);
    T& b = dbeta.vec(c);
    g = T((accumulate ? double(g) : 0.0) + v[0]);
    b = T((accumulate ? double(b) : 0.0) + v[1]);
  }
};

template <class T, class S = T>
struct LayerNormBackwardParams {
  View<const S> dy, x;
  View<const T> gamma, mean, rstd;
  View<S> dx;
  View<T> dgamma, dbeta;
  bool accumulate;
  std::int64_t c, p;
};
template <class T, class S>
struct LayerNormBackwardDxBody {
  static TESSERA_HD void run(const LayerNormBackwardParams<T, S>& q, std::int64_t item) {
    const std::int64_t n = k_div(item, q.p), p = item - n * q.p, C = q.c;
    const std::int64_t dyo = n * q.dy.stride[0] + q.dy.offset_from(2, p), dys = q.dy.stride[1];
    const std::int64_t xo = n * q.x.stride[0] + q.x.offset_from(2, p), xs = q.x.stride[1];
    const T m = q.mean.at(item), r = q.rstd.at(item);
    double a = 0, b = 0;  // Σ γ·dy, Σ γ·dy·x̂
    for (std::int64_t c = 0; c < C; ++c) {
      const T gd = convert<T>(q.dy.data[dyo + c * dys]) * q.gamma.vec(c);
      const T xh = (convert<T>(q.x.data[xo + c * xs]) - m) * r;
      a += double(gd);
      b += double(gd * xh);
    }
    const T inv_c = C > 0 ? T(1) / T(C) : T(0);
    const T at = T(a) * inv_c, bt = T(b) * inv_c;
    const std::int64_t dxo = n * q.dx.stride[0] + q.dx.offset_from(2, p), dxs = q.dx.stride[1];
    for (std::int64_t c = 0; c < C; ++c) {
      const T xh = (convert<T>(q.x.data[xo + c * xs]) - m) * r;
      const T t = convert<T>(q.dy.data[dyo + c * dys]) * q.gamma.vec(c) - at - xh * bt;
      q.dx.data[dxo + c * dxs] = convert<S>(t * r);
    }
  }
};
template <class T, class S>
std::size_t workspace_bytes(const LayerNormBackwardParams<T, S>& q) {
  return row_reduce_bytes<2>({q.x.shape[0], q.x.shape[1], q.x.numel_from(2), false});
}
template <class L, class T, class S>
void run_layernorm_backward(L& l, LayerNormBackwardParams<T, S> q) {
  q.c = q.x.shape[1];
  q.p = q.x.numel_from(2);
  void* ws = l.workspace(workspace_bytes(q));
  run_row_reduce<2>(l, {q.x.shape[0], q.c, q.p, false},
                    LayerNormGradSrc<T, S>{q.dy, q.x, q.mean, q.rstd, q.p},
                    GammaBetaStore<T>{q.dgamma, q.dbeta, q.accumulate}, ws);
  l.template pass<LayerNormBackwardDxBody<T, S>>(q, q.x.shape[0] * q.p);
}

}  // namespace tessera::compute::cuda::kernels
