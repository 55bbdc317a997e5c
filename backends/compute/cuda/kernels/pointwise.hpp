// The flat elementwise ops over views of one shape (any strides): add (y = a + b), axpy
// (y += α·x), scale (y *= α) and scale_samples (y = x·s[n], n the leading index). One item per
// element, row-major, so consecutive items touch consecutive W elements. Memory-bound: add moves
// 3 elements per element, axpy 3, scale 2, scale_samples 2 (+ s, cached): each should reach ≥ 80%
// of the GPU's copy bandwidth. Outputs may alias inputs (each item reads its element first).
#pragma once

#include <cstdint>

#include "half.hpp"
#include "hd.hpp"
#include "view.hpp"

namespace tessera::compute::cuda::kernels {

// T computes, S stores (S = Bf16/F16 with T = float: loaded widened, stored rounded once).

/// y = a + b (one shape).
template <class T, class S = T>
struct AddParams {
  View<const S> a, b;
  View<S> y;
};
template <class T, class S>
struct AddBody {
  static TESSERA_HD void run(const AddParams<T, S>& p, std::int64_t i) {
    p.y.at(i) = convert<S>(convert<T>(p.a.at(i)) + convert<T>(p.b.at(i)));
  }
};
template <class L, class T, class S>
void run_add(L& l, AddParams<T, S> p) {
  coalesce(p.a, p.b, p.y);
  l.template pass<AddBody<T, S>>(p, p.y.numel());
}

/// y += alpha·x (alpha rounded to T, as the cpu backend does).
template <class T, class S = T>
struct AxpyParams {
  View<const S> x;
  View<S> y;
  T alpha;
};
template <class T, class S>
struct AxpyBody {
  static TESSERA_HD void run(const AxpyParams<T, S>& p, std::int64_t i) {
    S& y = p.y.at(i);
    y = convert<S>(convert<T>(y) + convert<T>(p.x.at(i)) * p.alpha);
  }
};
template <class L, class T, class S>
void run_axpy(L& l, AxpyParams<T, S> p) {
  coalesce(p.x, p.y);
  l.template pass<AxpyBody<T, S>>(p, p.y.numel());
}

/// y *= alpha.
template <class T, class S = T>
struct ScaleParams {
  View<S> y;
  T alpha;
};
template <class T, class S>
struct ScaleBody {
  static TESSERA_HD void run(const ScaleParams<T, S>& p, std::int64_t i) {
    S& y = p.y.at(i);
    y = convert<S>(convert<T>(y) * p.alpha);
  }
};
template <class L, class T, class S>
void run_scale(L& l, ScaleParams<T, S> p) {
  coalesce(p.y);
  l.template pass<ScaleBody<T, S>>(p, p.y.numel());
}

/// y = x·s[n] with n = i / per_sample (the leading index; per_sample = numel / N). s (a Master
/// slot) in T.
template <class T, class S = T>
struct ScaleSamplesParams {
  View<const S> x;
  View<const T> s;  // (N)
  View<S> y;
  std::int64_t per_sample;
};
template <class T, class S>
struct ScaleSamplesBody {
  static TESSERA_HD void run(const ScaleSamplesParams<T, S>& p, std::int64_t i) {
    p.y.at(i) = convert<S>(convert<T>(p.x.at(i)) * p.s.vec(k_div(i, p.per_sample)));
  }
};
template <class L, class T, class S>
void run_scale_samples(L& l, ScaleSamplesParams<T, S> p) {
  const std::int64_t n = p.x.numel();
  if (n == 0) return;
  p.per_sample = n / p.s.shape[0];
  coalesce(p.x, p.y);
  l.template pass<ScaleSamplesBody<T, S>>(p, n);
}

}  // namespace tessera::compute::cuda::kernels
