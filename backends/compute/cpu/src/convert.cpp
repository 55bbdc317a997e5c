// bf16/f16 ↔ f32 conversions: the vector paths (AVX512_BF16, AVX512F, F16C, AVX2 — whichever the
// build targets), the scalar path (core/half.hpp), f64 → 16-bit rounding, and the strided tensor
// converter behind the copy op and the cpu backend's widening of bf16/f16 calls.
#include "convert.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__) || defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "conv_common.hpp"
#include "ops_common.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/half.hpp"
#include "thread_pool.hpp"

#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_* values
// (GCC bug 105593), wherever their intrinsics are inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace tessera::compute::cpu {

using core::DType;

namespace {

// ---- bf16: the upper half of a binary32 ---------------------------------------------------------

void widen_bf16(const std::uint16_t* s, float* d, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m512i h =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
    _mm512_storeu_ps(d + i, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
  }
#endif
#if defined(__AVX2__)
  for (; i + 8 <= n; i += 8) {
    const __m256i h =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_ps(d + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
  }
#endif
  for (; i < n; ++i) d[i] = core::bf16_to_float(s[i]);
}

void narrow_bf16(const float* s, std::uint16_t* d, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__AVX512BF16__)
  // VCVTNEPS2BF16: round to nearest even, binary32 subnormals as zero, NaN quieted by setting
  // bit 6 of the upper half — core::float_to_bf16 exactly (MXCSR is not consulted).
  for (; i + 16 <= n; i += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(s + i));
    std::memcpy(d + i, &h, sizeof h);
  }
#elif defined(__AVX2__)
  // core::float_to_bf16 lane by lane in integer arithmetic: round, then NaN and subnormal lanes.
  const __m256i k7fff = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i min_normal = _mm256_set1_epi32(0x00800000), quiet = _mm256_set1_epi32(0x0040);
  const __m256i sign = _mm256_set1_epi32(0x8000);
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(s + i));
    const __m256i mag = _mm256_and_si256(u, abs_mask), hi = _mm256_srli_epi32(u, 16);
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, k7fff), _mm256_and_si256(hi, one)), 16);
    __m256i r =
        _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), _mm256_cmpgt_epi32(mag, inf));
    r = _mm256_blendv_epi8(r, _mm256_and_si256(hi, sign), _mm256_cmpgt_epi32(min_normal, mag));
    // Every lane is below 2^16: pack to 16 bits and put the two 128-bit lanes' halves together.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_castsi256_si128(packed));
  }
#endif
  for (; i < n; ++i) d[i] = core::float_to_bf16(s[i]);
}

// ---- f16: IEEE binary16
// -------------------------------------------------------------------------- VCVTPH2PS quiets a
// signalling NaN; core::f16_to_float keeps its payload as it is (sign, all-ones exponent, m << 13),
// so NaN lanes are rebuilt from their bits.

void widen_f16(const std::uint16_t* s, float* d, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__AVX512F__)
  {
    const __m512i abs_mask = _mm512_set1_epi32(0x7fff), inf = _mm512_set1_epi32(0x7c00);
    const __m512i sign = _mm512_set1_epi32(0x8000), exp = _mm512_set1_epi32(0x70000000);
    for (; i + 16 <= n; i += 16) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
      const __m512i h = _mm512_cvtepu16_epi32(raw), mag = _mm512_and_si512(h, abs_mask);
      const __m512i nan =
          _mm512_or_si512(_mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(h, sign), 16),
                                          _mm512_slli_epi32(mag, 13)),
                          exp);
      const __m512i v = _mm512_castps_si512(_mm512_cvtph_ps(raw));
      _mm512_storeu_si512(d + i,
                          _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(mag, inf), v, nan));
    }
  }
#endif
#if defined(__F16C__) && defined(__AVX2__)
  {
    const __m256i abs_mask = _mm256_set1_epi32(0x7fff), inf = _mm256_set1_epi32(0x7c00);
    const __m256i sign = _mm256_set1_epi32(0x8000), exp = _mm256_set1_epi32(0x70000000);
    for (; i + 8 <= n; i += 8) {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m256i h = _mm256_cvtepu16_epi32(raw), mag = _mm256_and_si256(h, abs_mask);
      const __m256i nan =
          _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(h, sign), 16),
                                          _mm256_slli_epi32(mag, 13)),
                          exp);
      const __m256i v = _mm256_castps_si256(_mm256_cvtph_ps(raw));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                          _mm256_blendv_epi8(v, nan, _mm256_cmpgt_epi32(mag, inf)));
    }
  }
#endif
  for (; i < n; ++i) d[i] = core::f16_to_float(s[i]);
}

void narrow_f16(const float* s, std::uint16_t* d, std::int64_t n) {
  std::int64_t i = 0;
  // VCVTPS2PH with imm8 = 0: round to nearest even whatever MXCSR says, binary16 subnormals kept,
  // overflow to infinity, NaN quieted with the payload's upper bits — core::float_to_f16 exactly.
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < n; ++i) d[i] = core::float_to_f16(s[i]);
}

void check_half(const char* what, DType dt) {
  TESSERA_ASSERT(core::dtype_is_half(dt), "cpu ", what, ": dtype ", core::dtype_name(dt),
                 " is not bf16 or f16");
}

}  // namespace

void widen(const std::uint16_t* src, float* dst, std::int64_t n, DType dt) {
  check_half("widen", dt);
  dt == DType::BF16 ? widen_bf16(src, dst, n) : widen_f16(src, dst, n);
}

void narrow(const float* src, std::uint16_t* dst, std::int64_t n, DType dt) {
  check_half("narrow", dt);
  dt == DType::BF16 ? narrow_bf16(src, dst, n) : narrow_f16(src, dst, n);
}

template <class S>
void load_row(const S* src, compute_t<S>* dst, std::int64_t n, DType half) {
  if constexpr (std::is_same_v<S, std::uint16_t>)
    widen(src, dst, n, half);
  else
    std::copy(src, src + n, dst);
}
template <class S>
void store_row(const compute_t<S>* src, S* dst, std::int64_t n, DType half) {
  if constexpr (std::is_same_v<S, std::uint16_t>)
    narrow(src, dst, n, half);
  else
    std::copy(src, src + n, dst);
}
template void load_row<float>(const float*, float*, std::int64_t, DType);
template void load_row<double>(const double*, double*, std::int64_t, DType);
template void load_row<std::uint16_t>(const std::uint16_t*, float*, std::int64_t, DType);
template void store_row<float>(const float*, float*, std::int64_t, DType);
template void store_row<double>(const double*, double*, std::int64_t, DType);
template void store_row<std::uint16_t>(const float*, std::uint16_t*, std::int64_t, DType);

void widen_scalar(const std::uint16_t* src, float* dst, std::int64_t n, DType dt) {
  check_half("widen_scalar", dt);
  for (std::int64_t i = 0; i < n; ++i) dst[i] = core::half_to_float(src[i], dt);
}

void narrow_scalar(const float* src, std::uint16_t* dst, std::int64_t n, DType dt) {
  check_half("narrow_scalar", dt);
  for (std::int64_t i = 0; i < n; ++i) dst[i] = core::float_to_half(src[i], dt);
}

std::string_view widen_path(DType dt) noexcept {
#if defined(__AVX512F__)
  (void)dt;
  return "avx512f";
#elif defined(__AVX2__)
  if (dt == DType::BF16) return "avx2";
#if defined(__F16C__)
  return "f16c";
#else
  return "scalar";
#endif
#else
  (void)dt;
  return "scalar";
#endif
}

std::string_view narrow_path(DType dt) noexcept {
  if (dt == DType::BF16) {
#if defined(__AVX512BF16__)
    return "avx512bf16";
#elif defined(__AVX2__)
    return "avx2";
#else
    return "scalar";
#endif
  }
#if defined(__AVX512F__)
  return "avx512f";
#elif defined(__F16C__)
  return "f16c";
#else
  return "scalar";
#endif
}

// ---- strided tensors of any two float dtypes
// ------------------------------------------------------

namespace {

/// The element type holding a value of dtype T (16-bit floats as their raw bits).
template <DType T>
using Store = std::conditional_t<T == DType::F32, float,
                                 std::conditional_t<T == DType::F64, double, std::uint16_t>>;

/// One element of dtype S converted to dtype D, rounded once.
template <DType S, DType D>
Store<D> convert_one(Store<S> v) {
  if constexpr (S == D) {
    return v;
  } else if constexpr (core::dtype_is_half(S)) {
    const float f = core::half_to_float(v, S);  // exact
    if constexpr (core::dtype_is_half(D))
      return core::float_to_half(f, D);
    else
      return static_cast<Store<D>>(f);
  } else if constexpr (core::dtype_is_half(D)) {
    if constexpr (S == DType::F32)
      return core::float_to_half(v, D);
    else
      return core::double_to_half(v, D);
  } else {
    return static_cast<Store<D>>(v);  // f32 ↔ f64, to nearest
  }
}

/// n elements, src stride ss and dst stride ds (elements).
template <DType S, DType D>
void convert_run(const Store<S>* s, std::int64_t ss, Store<D>* d, std::int64_t ds, std::int64_t n) {
  if (ss == 1 && ds == 1) {
    if constexpr (core::dtype_is_half(S) && D == DType::F32) return widen(s, d, n, S);
    if constexpr (S == DType::F32 && core::dtype_is_half(D)) return narrow(s, d, n, D);
    if constexpr (S == D) {
      if (s != d) std::memmove(d, s, std::size_t(n) * sizeof(*s));
      return;
    }
  }
  for (std::int64_t j = 0; j < n; ++j) d[j * ds] = convert_one<S, D>(s[j * ss]);
}

template <DType S, DType D>
void convert_typed(const core::Tensor& x, core::Tensor& y, ThreadPool& pool) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  const auto* src = static_cast<const Store<S>*>(x.raw_data());
  auto* dst = static_cast<Store<D>*>(y.raw_data());
  if (x.is_contiguous() && y.is_contiguous()) {
    ops::parallel_flat(pool, n, [&](std::int64_t s, std::int64_t e) {
      convert_run<S, D>(src + s, 1, dst + s, 1, e - s);
    });
    return;
  }
  const int nd = x.ndim();
  const std::int64_t len = nd > 0 ? x.size(nd - 1) : 1, rows = n / len;
  const std::int64_t sx = nd > 0 ? x.stride(nd - 1) : 1, sy = nd > 0 ? y.stride(nd - 1) : 1;
  const std::int64_t per_unit = std::max<std::int64_t>(1, ops::kFlatChunk / len);
  ops::parallel_units(
      pool, ops::ceil_div(rows, per_unit), per_unit * len, [&](std::int64_t u, int) {
        for (std::int64_t r = u * per_unit; r < std::min(rows, (u + 1) * per_unit); ++r) {
          // Offsets of row r: its index over the leading dims, last of them fastest.
          std::int64_t ox = 0, oy = 0;
          for (std::int64_t d = nd - 2, rest = r; d >= 0; --d) {
            const std::int64_t i = rest % x.size(static_cast<int>(d));
            rest /= x.size(static_cast<int>(d));
            ox += i * x.stride(static_cast<int>(d));
            oy += i * y.stride(static_cast<int>(d));
          }
          convert_run<S, D>(src + ox, sx, dst + oy, sy, len);
        }
      });
}

template <DType S>
void convert_from(const core::Tensor& x, core::Tensor& y, ThreadPool& pool) {
  switch (y.dtype()) {
    case DType::F32:
      return convert_typed<S, DType::F32>(x, y, pool);
    case DType::F64:
      return convert_typed<S, DType::F64>(x, y, pool);
    case DType::BF16:
      return convert_typed<S, DType::BF16>(x, y, pool);
    case DType::F16:
      return convert_typed<S, DType::F16>(x, y, pool);
    default:
      throw Unsupported(
          detail::cat("cpu convert: target ", y.describe(),
                      " is not a float dtype (f32, f64, bf16 and f16 are supported)"));
  }
}

}  // namespace

void convert_tensor(const core::Tensor& src, core::Tensor& dst, ThreadPool& pool) {
  TESSERA_CHECK(src.shape() == dst.shape(), "cpu convert: ", src.describe(), " into ",
                dst.describe(), ": the shapes differ");
  TESSERA_CHECK(
      src.is_host() && dst.is_host(), "cpu convert: ", src.describe(), " into ", dst.describe(),
      ": the cpu backend converts host memory only; copy device tensors with to_host() first");
  switch (src.dtype()) {
    case DType::F32:
      return convert_from<DType::F32>(src, dst, pool);
    case DType::F64:
      return convert_from<DType::F64>(src, dst, pool);
    case DType::BF16:
      return convert_from<DType::BF16>(src, dst, pool);
    case DType::F16:
      return convert_from<DType::F16>(src, dst, pool);
    default:
      throw Unsupported(
          detail::cat("cpu convert: source ", src.describe(),
                      " is not a float dtype (f32, f64, bf16 and f16 are supported)"));
  }
}

}  // namespace tessera::compute::cpu
