// bf16/f16 ↔ f32 conversion of contiguous runs with the CPU's vector instructions where the build
// targets them (AVX512_BF16, AVX512F, F16C, AVX2), and of whole strided tensors between any two
// float dtypes. Every path gives exactly the bits of core/half.hpp (the one definition), so results
// do not depend on the CPU; tests/compute/convert_test.cpp checks every 16-bit pattern.
#pragma once

#include <cstdint>
#include <string_view>

#include "tessera/core/tensor.hpp"

namespace tessera::compute::cpu {

class ThreadPool;

/// dst[i] = the binary32 value of the 16-bit float src[i] of dtype dt (BF16 or F16); exact.
void widen(const std::uint16_t* src, float* dst, std::int64_t n, core::DType dt);
/// dst[i] = src[i] rounded to the 16-bit float dtype dt (BF16 or F16), as core::float_to_half.
void narrow(const float* src, std::uint16_t* dst, std::int64_t n, core::DType dt);
/// The scalar versions (core/half.hpp element by element), the reference of the vector paths.
void widen_scalar(const std::uint16_t* src, float* dst, std::int64_t n, core::DType dt);
void narrow_scalar(const float* src, std::uint16_t* dst, std::int64_t n, core::DType dt);

/// The instructions widen / narrow use for dt in this build: "avx512bf16", "avx512f", "f16c",
/// "avx2" or "scalar" (tests print it; it follows the compiler's target, -march=native).
std::string_view widen_path(core::DType dt) noexcept;
std::string_view narrow_path(core::DType dt) noexcept;

/// dst = src converted to dst's dtype, element by element: any two of f32, f64, bf16, f16 (the
/// same dtype copies), same shape, either side any strides; each value is rounded once (to nearest
/// even; f64 → bf16/f16 by core::double_to_half) where dst is narrower. src and dst must not
/// overlap unless they are one tensor. Rows of the last dimension are spread over `pool`; contiguous runs of f32 ↔ bf16/f16 take the vector
/// paths. Throws Unsupported for a non-float dtype.
void convert_tensor(const core::Tensor& src, core::Tensor& dst, ThreadPool& pool);

}  // namespace tessera::compute::cpu
