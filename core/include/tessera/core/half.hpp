// bf16 and fp16 storage: the one definition of how tessera rounds to and widens from its 16-bit
// float types. Every path that narrows (the CPU kernels' vector code, the communication backends'
// reductions, core's tensor operations) must give these bits, so a result does not depend on the
// CPU that computed it; tests/core/half_test.cpp checks the definitions against float64 over all
// 65,536 patterns and the rounding boundaries.
//
// - bf16 is the upper half of an IEEE binary32: widening is exact (a shift). Narrowing rounds to
//   nearest, ties to even; binary32 subnormals narrow to a signed zero (as AVX512_BF16's
//   VCVTNEPS2BF16 does, which ignores MXCSR and treats them as zero); NaN stays NaN (quieted).
// - fp16 is IEEE binary16: widening is exact. Narrowing rounds to nearest, ties to even, with
//   binary16 subnormals and overflow to infinity (as F16C's VCVTPS2PH with imm8 = 0 does); NaN
//   stays NaN (quieted, sign kept).
#pragma once

#include <bit>
#include <cstdint>

#include "tessera/core/dtype.hpp"

namespace tessera::core {

/// binary32 → bf16 bits, round to nearest even; subnormals to signed zero.
constexpr std::uint16_t float_to_bf16(float f) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // NaN: quiet it
  if (mag < 0x00800000u) return static_cast<std::uint16_t>((u >> 16) & 0x8000u);  // zero, subnormal
  const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);                      // inf stays inf
  return static_cast<std::uint16_t>(rounded >> 16);
}

/// bf16 bits → binary32 (exact).
constexpr float bf16_to_float(std::uint16_t h) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

/// binary32 → binary16 bits, round to nearest even, subnormals kept, overflow to infinity.
constexpr std::uint16_t float_to_f16(float f) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((mag >> 13) & 0x03ffu));  // NaN
  if (mag >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504, or inf
  if (mag < 0x38800000u) {
    // Below 2^-14: a binary16 subnormal (or zero), m · 2^-24 with m < 1024. Shift the 24-bit
    // significand right so its unit is 2^-24, rounding to nearest even.
    if (mag < 0x33000000u) return sign;  // below 2^-25: rounds to zero (2^-25 itself is a tie to 0)
    const std::uint32_t e = mag >> 23;   // biased exponent, 102..112
    const std::uint32_t sig = (mag & 0x007fffffu) | 0x00800000u;
    const std::uint32_t shift = 126u - e;  // 14..24
    std::uint32_t m = sig >> shift;
    const std::uint32_t rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (m & 1u))) ++m;
    return static_cast<std::uint16_t>(sign | m);
  }
  // Normal: rebias the exponent (127 → 15) and round the 23-bit mantissa to 10 bits.
  const std::uint32_t rebased = mag - 0x38000000u;  // exponent − 112, in place
  const std::uint32_t rounded = rebased + 0x0fffu + ((rebased >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

/// binary16 bits → binary32 (exact).
constexpr float f16_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x03ffu;
  if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  if (e != 0) return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return std::bit_cast<float>(sign);
  // Subnormal: m · 2^-24, exact in binary32.
  const float v = static_cast<float>(m) * 5.9604644775390625e-08f;
  return sign ? -v : v;
}

/// True for the 16-bit float storage types (bf16, f16).
constexpr bool dtype_is_half(DType t) noexcept { return t == DType::BF16 || t == DType::F16; }

/// The dtype a half-precision value computes and accumulates in: f32 for bf16/f16, else t itself.
constexpr DType accumulate_dtype(DType t) noexcept { return dtype_is_half(t) ? DType::F32 : t; }

/// 16-bit float bits of dtype t (BF16 or F16) → binary32.
constexpr float half_to_float(std::uint16_t h, DType t) noexcept {
  return t == DType::BF16 ? bf16_to_float(h) : f16_to_float(h);
}
/// binary32 → 16-bit float bits of dtype t (BF16 or F16).
constexpr std::uint16_t float_to_half(float f, DType t) noexcept {
  return t == DType::BF16 ? float_to_bf16(f) : float_to_f16(f);
}

/// binary64 → 16-bit float bits of dtype t (BF16 or F16), rounded once to nearest even — not twice
/// through binary32: d is first rounded to binary32 *to odd* (truncated, the last bit set when
/// inexact), which binary32's 13 (bf16: 16) spare significand bits make exact for the final
/// rounding; then float_to_half. Equal to float_to_half(float(d), t) whenever d is a binary32.
/// Values in binary32's subnormal range narrow to bf16 as their binary32 rounding does (to zero).
constexpr std::uint16_t double_to_half(double d, DType t) noexcept {
  float f = static_cast<float>(d);  // to nearest: NaN stays NaN, past the f32 range infinity
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const bool finite = (u & 0x7f800000u) != 0x7f800000u;
  if (d == d && finite && static_cast<double>(f) != d) {
    const double fd = static_cast<double>(f);
    if ((fd < 0 ? -fd : fd) > (d < 0 ? -d : d)) --u;  // rounded away from zero: truncate instead
    f = std::bit_cast<float>(u | 1u);
  }
  return float_to_half(f, t);
}

/// The largest finite value of a half dtype (bf16 ≈ 3.39e38, f16 65504).
constexpr double half_max(DType t) noexcept { return t == DType::BF16 ? 3.3895313892515355e38 : 65504.0; }
/// The unit roundoff of a float dtype: half the distance from 1 to the next value (bf16 2^-8,
/// f16 2^-11, f32 2^-24, f64 2^-53). Tolerances are built from it.
constexpr double unit_roundoff(DType t) noexcept {
  switch (t) {
    case DType::BF16: return 1.0 / 256.0;
    case DType::F16: return 1.0 / 2048.0;
    case DType::F32: return 5.9604644775390625e-08;
    case DType::F64: return 1.1102230246251565e-16;
    default: return 0.0;
  }
}

}  // namespace tessera::core
