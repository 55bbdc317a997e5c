// The flat elementwise ops over views of one shape (any strides): add (y = a + b), axpy
// (y += α·x), scale (y *= α) and scale_samples (y = x·s[n], n the leading index). One item per
// element, row-major, so consecutive items touch consecutive W elements. Memory-bound: add moves
// 3 elements per element, axpy 3, scale 2, scale_samples 2 (+ s, cached): each should reach ≥ 80%
// of the GPU's copy bandwidth. Outputs may alias inputs (each item reads its element first).
#pragma once

#include <cstdint>

#include "hd.hpp"
#include "view.hpp"

namespace tessera::compute::cuda::kernels {

/// y = a + b (one shape).
template <class T>
struct AddParams {
  View<const T> a, b;
  View<T> y;
};
template <class T>
struct AddBody {
  static TESSERA_HD void run(const AddParams<T>& p, std::int64_t i) {
    p.y.at(i) = p.a.at(i) + p.b.at(i);
  }
};
template <class L, class T>
void run_add(L& l, AddParams<T> p) {
  coalesce(p.a, p.b, p.y);
  l.template pass<AddBody<T>>(p, p.y.numel());
}

/// y += alpha·x (alpha rounded to T, as the cpu backend does).
template <class T>
struct AxpyParams {
  View<const T> x;
  View<T> y;
  T alpha;
};
template <class T>
struct AxpyBody {
  static TESSERA_HD void run(const AxpyParams<T>& p, std::int64_t i) {
    T& y = p.y.at(i);
    y = y + p.x.at(i) * p.alpha;
  }
};
template <class L, class T>
void run_axpy(L& l, AxpyParams<T> p) {
  coalesce(p.x, p.y);
  l.template pass<AxpyBody<T>>(p, p.y.numel());
}

/// y *= alpha.
template <class T>
struct ScaleParams {
  View<T> y;
  T alpha;
};
template <class T>
struct ScaleBody {
  static TESSERA_HD void run(const ScaleParams<T>& p, std::int64_t i) {
    T& y = p.y.at(i);
    y = y * p.alpha;
  }
};
template <class L, class T>
void run_scale(L& l, ScaleParams<T> p) {
  coalesce(p.y);
  l.template pass<ScaleBody<T>>(p, p.y.numel());
}

/// y = x·s[n] with n = i / per_sample (the leading index; per_sample = numel / N).
template <class T>
struct ScaleSamplesParams {
  View<const T> x;
  View<const T> s;  // (N)
  View<T> y;
  std::int64_t per_sample;
};
template <class T>
struct ScaleSamplesBody {
  static TESSERA_HD void run(const ScaleSamplesParams<T>& p, std::int64_t i) {
    p.y.at(i) = p.x.at(i) * p.s.vec(k_div(i, p.per_sample));
  }
};
template <class L, class T>
void run_scale_samples(L& l, ScaleSamplesParams<T> p) {
  const std::int64_t n = p.x.numel();
  if (n == 0) return;
  p.per_sample = n / p.s.shape[0];
  coalesce(p.x, p.y);
  l.template pass<ScaleSamplesBody<T>>(p, n);
}

}  // namespace tessera::compute::cuda::kernels
