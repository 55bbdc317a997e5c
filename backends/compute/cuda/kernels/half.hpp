// bf16 and fp16 storage in the kernel bodies: Bf16 / F16 (the raw 16 bits of a tensor element,
// distinct types so a body knows which format it holds) and convert<D>(x), the one conversion
// between the element types of the kernels (float, double, Bf16, F16). The bits are exactly those
// of core/include/tessera/core/half.hpp, whose constexpr functions are called here on the host and
// on the device (the cuda target compiles with --expt-relaxed-constexpr): one definition, so the
// host loop that the conformance suite checks runs the very conversion the GPU runs.
//
// Why not CUDA's intrinsics: __float2bfloat16_rn is `cvt.rn.bf16.f32`, which keeps binary32
// subnormals (rounding them to bf16 subnormals); half.hpp flushes them to a signed zero, as
// AVX512_BF16's VCVTNEPS2BF16 does on the CPUs tessera runs on, so the GPU must not use it.
// __float2half_rn (`cvt.rn.f16.f32`, IEEE round to nearest even with subnormals) agrees with
// half.hpp's float_to_f16; it is not used either, so both formats take one code path.
#pragma once

#include <cstdint>
#include <type_traits>

#include "hd.hpp"
#include "tessera/core/half.hpp"

namespace tessera::compute::cuda::kernels {

/// A bf16 tensor element (its raw bits).
struct Bf16 {
  std::uint16_t bits;
};
/// An IEEE binary16 tensor element (its raw bits).
struct F16 {
  std::uint16_t bits;
};
static_assert(sizeof(Bf16) == 2 && sizeof(F16) == 2 && std::is_trivially_copyable_v<Bf16>);

template <class T>
inline constexpr bool kIsHalf =
    std::is_same_v<std::remove_const_t<T>, Bf16> || std::is_same_v<std::remove_const_t<T>, F16>;

/// The exact binary32 value of a 16-bit element.
TESSERA_HD constexpr float widen(Bf16 h) { return core::bf16_to_float(h.bits); }
TESSERA_HD constexpr float widen(F16 h) { return core::f16_to_float(h.bits); }

/// x as a D (float, double, Bf16 or F16): exact where D holds it; to a 16-bit type, rounded to
/// nearest even by half.hpp's definition (a double goes through binary32 first: rounded to
/// nearest f32, then to the 16-bit type, as the widen-compute-round path of every op does);
/// between float and double, the C++ conversion (round to nearest).
template <class D, class S>
TESSERA_HD constexpr D convert(S x) {
  if constexpr (std::is_same_v<D, S>) {
    return x;
  } else if constexpr (kIsHalf<S>) {
    const float f = widen(x);
    if constexpr (std::is_same_v<D, Bf16>)
      return Bf16{core::float_to_bf16(f)};
    else if constexpr (std::is_same_v<D, F16>)
      return F16{core::float_to_f16(f)};
    else
      return static_cast<D>(f);
  } else if constexpr (std::is_same_v<D, Bf16>) {
    return Bf16{core::float_to_bf16(static_cast<float>(x))};
  } else if constexpr (std::is_same_v<D, F16>) {
    return F16{core::float_to_f16(static_cast<float>(x))};
  } else {
    return static_cast<D>(x);
  }
}

/// The type a value of element type T is computed in: float for Bf16/F16, else T.
template <class T>
using ComputeOf = std::conditional_t<kIsHalf<T>, float, std::remove_const_t<T>>;

// The definitions used here are half.hpp's, checked there over all 65,536 patterns; these pin
// that the kernels' spelling reaches them (and runs at compile time, as nvcc's device code does).
static_assert(convert<Bf16>(1.0f).bits == 0x3f80 && convert<F16>(1.0f).bits == 0x3c00);
static_assert(convert<Bf16>(1.0e-40f).bits == 0x0000);  // a binary32 subnormal: flushed
static_assert(convert<F16>(5.9604644775390625e-08f).bits == 0x0001);  // the least f16 subnormal
static_assert(convert<float>(Bf16{0xc040}) == -3.0f &&
              convert<double>(F16{0x3555}) == 0.333251953125);

}  // namespace tessera::compute::cuda::kernels
