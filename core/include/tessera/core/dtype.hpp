// Element types: fp32 is the reference dtype; fp64 serves tests; bf16/fp16 store activations in
// mixed precision (their bits as std::uint16_t on the host; core/half.hpp rounds and widens them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace tessera::core {

/// Element type of a tensor or a communication buffer.
enum class DType : std::uint8_t { F32, F64, BF16, F16, I32, I64 };

/// Bytes per element.
constexpr std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
  }
  return 0;
}

/// Short lowercase name ("f32", "f64", ...), used in messages and files.
constexpr std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
  }
  return "?";
}

/// True for the types the CPU kernels compute in (f32, f64; bf16/f16 calls compute in f32).
constexpr bool dtype_is_float(DType t) noexcept { return t == DType::F32 || t == DType::F64; }

template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::F32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::F64;
};
template <>
struct DTypeOf<std::int32_t> {
  static constexpr DType value = DType::I32;
};
template <>
struct DTypeOf<std::int64_t> {
  static constexpr DType value = DType::I64;
};
/// The DType of a C++ element type (float → F32, double → F64, ...).
template <class T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

/// True when host elements of type T hold dtype t: dtype_of<T> == t, or T = std::uint16_t for
/// bf16 and f16 (their raw bits; core/half.hpp converts them).
template <class T>
constexpr bool dtype_holds(DType t) noexcept {
  if constexpr (std::is_same_v<T, std::uint16_t>)
    return t == DType::BF16 || t == DType::F16;
  else
    return dtype_of<T> == t;
}
/// The name of element type T in messages: its dtype's, "u16 (bf16/f16 bits)" for std::uint16_t.
template <class T>
constexpr std::string_view element_type_name() noexcept {
  if constexpr (std::is_same_v<T, std::uint16_t>)
    return "u16 (bf16/f16 bits)";
  else
    return dtype_name(dtype_of<T>);
}

}  // namespace tessera::core
