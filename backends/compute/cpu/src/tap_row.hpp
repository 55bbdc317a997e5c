// The inner loop of the depthwise path: one output row as a weighted sum of shifted input rows.
#pragma once

#include <algorithm>

#include "simd.hpp"

namespace tessera::compute::cpu {

namespace detail {

// acc[v] (one block of NV vectors at q) = base + Σ_t coef[t]·src[t][q + v·L], kept in registers.
template <class T, int NV>
inline void tap_block(T* out, const T* const* src, const T* coef, int nterms, T bias, const T* init,
                      int q) {
  using V = simd::Vec<T>;
  constexpr int L = simd::kLanes<T>;
  V acc[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) acc[v] = init ? simd::load(init + q + v * L) : simd::splat(bias);
  for (int t = 0; t < nterms; ++t) {
    const V c = simd::splat(coef[t]);
    const T* s = src[t] + q;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[v] += c * simd::load(s + v * L);
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) simd::store(out + q + v * L, acc[v]);
}

}  // namespace detail

/// out[q] = base[q] + Σ_t coef[t]·src[t][q] for q in [0, len), where base is init[q] (init may
/// alias out) or the constant `bias` when init is null. Each src[t] must be readable for
/// round_up(len, kLanes) elements; out and init are touched in [0, len) only. The sum runs over t
/// in order for every q (fixed order: deterministic).
template <class T>
void tap_sum_row(T* out, int len, const T* const* src, const T* coef, int nterms, T bias,
                 const T* init) {
  constexpr int L = simd::kLanes<T>;
  int q = 0;
  for (; q + 8 * L <= len; q += 8 * L)
    detail::tap_block<T, 8>(out, src, coef, nterms, bias, init, q);
  if (q + 4 * L <= len) {
    detail::tap_block<T, 4>(out, src, coef, nterms, bias, init, q);
    q += 4 * L;
  }
  for (; q + L <= len; q += L) detail::tap_block<T, 1>(out, src, coef, nterms, bias, init, q);
  if (q < len) {  // last partial vector: compute into a local row, store the valid lanes
    const int n = len - q;
    T tmp[L] = {};
    if (init) std::copy(init + q, init + len, tmp);
    auto acc = init ? simd::load(tmp) : simd::splat(bias);
    for (int t = 0; t < nterms; ++t) acc += simd::splat(coef[t]) * simd::load(src[t] + q);
    simd::store_partial(out + q, acc, n);
  }
}

}  // namespace tessera::compute::cpu
