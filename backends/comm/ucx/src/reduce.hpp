// Element-wise reductions by dtype for the UCX collectives (acc = acc ⊕ in), Avg's division, and
// the bf16/f16 side: widening to and rounding from the f32 they are reduced in (core/half.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "tessera/comm/backend.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/half.hpp"

namespace tessera::comm::ucx {

template <class T>
void reduce_typed(T* __restrict acc, const T* __restrict in, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: {
      // Eigen's packets: element-wise, so the sums are the scalar loop's bit for bit.
      using A = Eigen::Array<T, Eigen::Dynamic, 1>;
      const auto len = static_cast<Eigen::Index>(n);
      Eigen::Map<A>(acc, len) += Eigen::Map<const A>(in, len);
      break;
    }
    case ReduceOp::Max:
      for (std::size_t i = 0; i < n; ++i) acc[i] = in[i] > acc[i] ? in[i] : acc[i];
      break;
    case ReduceOp::Min:
      for (std::size_t i = 0; i < n; ++i) acc[i] = in[i] < acc[i] ? in[i] : acc[i];
      break;
  }
}

template <class F>
void with_type(core::DType t, F&& f) {
  switch (t) {
    case core::DType::F32: f(float{}); break;
    case core::DType::F64: f(double{}); break;
    case core::DType::I32: f(std::int32_t{}); break;
    case core::DType::I64: f(std::int64_t{}); break;
    // bf16/f16 are reduced in f32 (widen, reduce_into F32, narrow), never in 16 bits.
    default:
      throw InternalError("ucx: a 16-bit reduction step reached reduce.hpp unwidened");
  }
}

/// acc[i] = acc[i] ⊕ in[i] for `n` elements of `t` (acc and in do not overlap).
inline void reduce_into(void* acc, const void* in, std::size_t n, core::DType t, ReduceOp op) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    reduce_typed(static_cast<T*>(acc), static_cast<const T*>(in), n, op);
  });
}

/// Divides by `size` (Avg), in the element type (integers truncate toward zero).
inline void finish_avg(void* buf, std::size_t n, core::DType t, int size) {
  if (n == 0) return;
  with_type(t, [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(buf);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(size));
  });
}

/// dst[i] = the f32 value of the 16-bit pattern src[i] of dtype t (BF16 or F16; exact).
inline void widen_half(const void* src, float* dst, std::size_t n, core::DType t) {
  const auto* h = static_cast<const std::uint16_t*>(src);
  for (std::size_t i = 0; i < n; ++i) dst[i] = core::half_to_float(h[i], t);
}

/// dst[i] = src[i] rounded to dtype t (BF16 or F16; round to nearest even, core/half.hpp).
inline void narrow_half(const float* src, void* dst, std::size_t n, core::DType t) {
  auto* h = static_cast<std::uint16_t*>(dst);
  for (std::size_t i = 0; i < n; ++i) h[i] = core::float_to_half(src[i], t);
}

/// out = round(in(0) ⊕ in(1) ⊕ ... ⊕ in(size-1)) for `count` 16-bit elements of dtype t: every
/// rank's input widened to f32, combined in f32 in rank order (Avg: divided by size in f32), then
/// rounded once, as the local backend does; `in(r)` is rank r's 16-bit data. Works in chunks, so
/// `out` may be one of the inputs.
template <class In>
void reduce_half_in_order(void* out, int size, In&& in, std::size_t count, core::DType t,
                          ReduceOp op) {
  constexpr std::size_t kChunk = 4096;
  alignas(64) float acc[kChunk];
  alignas(64) float x[kChunk];
  for (std::size_t c0 = 0; c0 < count; c0 += kChunk) {
    const std::size_t m = std::min(kChunk, count - c0);
    widen_half(static_cast<const std::uint16_t*>(static_cast<const void*>(in(0))) + c0, acc, m, t);
    for (int r = 1; r < size; ++r) {
      widen_half(static_cast<const std::uint16_t*>(static_cast<const void*>(in(r))) + c0, x, m, t);
      reduce_typed(acc, x, m, op);
    }
    if (op == ReduceOp::Avg) finish_avg(acc, m, core::DType::F32, size);
    narrow_half(acc, static_cast<std::uint16_t*>(out) + c0, m, t);
  }
}

}  // namespace tessera::comm::ucx
