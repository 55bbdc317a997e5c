// SIMD loop helpers of the non-convolution kernels: tail-safe loads, double accumulators for
// float lanes, and the fixed-order reductions (GCC 12 at -O2 vectorises almost no plain loop:
// its "very cheap" cost model refuses unknown trip counts).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "simd.hpp"

namespace tessera::compute::cpu::ops {

using simd::kLanes;
using simd::Vec;

namespace detail {
/// kLanes<double> floats: the half of a Vec<float> that widens to one Vec<double>.
typedef float HalfF __attribute__((vector_size(simd::kVecBytes / 2)));
}  // namespace detail

/// kLanes<T> doubles (what one Vec<T> widens to for accumulation), held as native double vectors:
/// one for double, two for float (a 2×-wide GCC vector would live on the stack).
template <class T>
struct AccVec {
  static constexpr int kParts = kLanes<T> / kLanes<double>;
  Vec<double> part[kParts];

  AccVec& operator+=(const AccVec& o) {
    for (int k = 0; k < kParts; ++k) part[k] += o.part[k];
    return *this;
  }
  friend AccVec operator+(AccVec a, const AccVec& b) { return a += b; }
  friend AccVec operator-(AccVec a, const AccVec& b) {
    for (int k = 0; k < kParts; ++k) a.part[k] -= b.part[k];
    return a;
  }
  friend AccVec operator*(AccVec a, const AccVec& b) {
    for (int k = 0; k < kParts; ++k) a.part[k] *= b.part[k];
    return a;
  }
  friend AccVec operator-(AccVec a, double s) {
    for (int k = 0; k < kParts; ++k) a.part[k] -= s;
    return a;
  }
};

/// Loop helpers are forced inline: GCC's -O2 inliner leaves a vec_for body as a call per vector,
/// with its accumulators in memory.
#define TESSERA_OPS_INLINE __attribute__((always_inline)) inline

/// The length of one step of vec_for: std::integral_constant<int, kLanes<T>> for a full vector
/// (a compile-time constant even where the body is not inlined), an int for the tail.
template <class L>
inline constexpr bool kIsTail = std::is_same_v<L, int>;

/// `len` (≤ kLanes) elements from p, the other lanes zero.
template <class T, class L>
TESSERA_OPS_INLINE Vec<T> vload(const T* p, L len) {
  if constexpr (!kIsTail<L>) {
    return simd::load(p);
  } else {
    Vec<T> v{};
    std::memcpy(&v, p, sizeof(T) * static_cast<std::size_t>(len));
    return v;
  }
}
/// Stores the first `len` (≤ kLanes) lanes of v to p.
template <class T, class L>
TESSERA_OPS_INLINE void vstore(T* p, Vec<T> v, L len) {
  if constexpr (!kIsTail<L>)
    simd::store(p, v);
  else
    std::memcpy(p, &v, sizeof(T) * static_cast<std::size_t>(len));
}
template <class T>
inline Vec<T> vsplat(T s) {
  return simd::splat(s);
}
/// `len` doubles of an AccVec from p (the other lanes zero), and its store.
template <class T, class L>
TESSERA_OPS_INLINE AccVec<T> aload(const double* p, L len) {
  AccVec<T> v;
  if constexpr (!kIsTail<L>) {
    for (int k = 0; k < AccVec<T>::kParts; ++k) v.part[k] = simd::load(p + k * kLanes<double>);
  } else {
    double tmp[kLanes<T>] = {};
    std::memcpy(tmp, p, sizeof(double) * static_cast<std::size_t>(len));
    for (int k = 0; k < AccVec<T>::kParts; ++k) v.part[k] = simd::load(tmp + k * kLanes<double>);
  }
  return v;
}
template <class T, class L>
TESSERA_OPS_INLINE void astore(double* p, const AccVec<T>& v, L len) {
  if constexpr (!kIsTail<L>) {
    for (int k = 0; k < AccVec<T>::kParts; ++k) simd::store(p + k * kLanes<double>, v.part[k]);
  } else {
    double tmp[kLanes<T>];
    for (int k = 0; k < AccVec<T>::kParts; ++k) simd::store(tmp + k * kLanes<double>, v.part[k]);
    std::memcpy(p, tmp, sizeof(double) * static_cast<std::size_t>(len));
  }
}

namespace detail {
/// Lanes [Off, Off + kLanes<double>) of a float vector.
template <int Off, int... I>
TESSERA_OPS_INLINE HalfF lanes_of(Vec<float> v, std::integer_sequence<int, I...>) {
  return __builtin_shufflevector(v, v, (Off + I)...);
}
}  // namespace detail

/// Vec<T> → kLanes<T> doubles.
template <class T>
TESSERA_OPS_INLINE AccVec<T> widen(Vec<T> v) {
  AccVec<T> a;
  if constexpr (std::is_same_v<T, double>) {
    a.part[0] = v;
  } else {
    static_assert(AccVec<T>::kParts == 2);
    constexpr auto idx = std::make_integer_sequence<int, kLanes<double>>{};
    a.part[0] = __builtin_convertvector(detail::lanes_of<0>(v, idx), Vec<double>);
    a.part[1] = __builtin_convertvector(detail::lanes_of<kLanes<double>>(v, idx), Vec<double>);
  }
  return a;
}

/// Sum of the lanes in lane order (deterministic).
template <class T>
inline double lanes_sum(const AccVec<T>& v) {
  double s = 0;
  for (int k = 0; k < AccVec<T>::kParts; ++k)
    for (int i = 0; i < kLanes<double>; ++i) s += v.part[k][i];
  return s;
}

/// Calls body(i, len) for i = 0, L, 2L, ... with len = L = kLanes<T> (as an integral_constant),
/// then once with the tail length (an int, 0 < len < L) if n is not a multiple of L. The body
/// (a generic lambda) is inlined.
template <class T, class Body>
__attribute__((always_inline, flatten)) inline void vec_for(std::int64_t n, Body&& body) {
  std::int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>) body(i, std::integral_constant<int, kLanes<T>>{});
  if (i < n) body(i, static_cast<int>(n - i));
}

/// Σ p[i] in double.
template <class T>
inline double sum_d(const T* p, std::int64_t n) {
  AccVec<T> acc{};
  vec_for<T>(n, [&](std::int64_t i, auto len) { acc += widen<T>(vload(p + i, len)); });
  return lanes_sum(acc);
}
/// Σ a[i]·b[i] in double.
template <class T>
inline double dot_d(const T* a, const T* b, std::int64_t n) {
  AccVec<T> acc{};
  vec_for<T>(n, [&](std::int64_t i, auto len) {
    acc += widen<T>(vload(a + i, len)) * widen<T>(vload(b + i, len));
  });
  return lanes_sum(acc);
}
/// s += Σ p[i] and q += Σ p[i]² in double.
template <class T>
inline void sum_sumsq_d(const T* p, std::int64_t n, double& s, double& q) {
  AccVec<T> as{}, aq{};
  vec_for<T>(n, [&](std::int64_t i, auto len) {
    const AccVec<T> v = widen<T>(vload(p + i, len));
    as += v;
    aq += v * v;
  });
  s += lanes_sum(as);
  q += lanes_sum(aq);
}

}  // namespace tessera::compute::cpu::ops
