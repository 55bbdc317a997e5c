// Portable SIMD vectors (GCC/Clang vector extensions) for the inner loops of the CPU kernels.
#pragma once

#include <cstring>

namespace tessera::compute::cpu::simd {

/// Widest vector the build target has: 64 bytes with AVX-512, 32 with AVX, else 16.
/// TESSERA_CPU_VEC_BYTES overrides it (tests of the 64-byte code paths on an AVX2 machine).
#if defined(TESSERA_CPU_VEC_BYTES)
inline constexpr int kVecBytes = TESSERA_CPU_VEC_BYTES;
#elif defined(__AVX512F__)
inline constexpr int kVecBytes = 64;
#elif defined(__AVX__)
inline constexpr int kVecBytes = 32;
#else
inline constexpr int kVecBytes = 16;
#endif

template <class T>
struct VecType;
template <>
struct VecType<float> {
  typedef float type __attribute__((vector_size(kVecBytes)));
};
template <>
struct VecType<double> {
  typedef double type __attribute__((vector_size(kVecBytes)));
};

/// A vector of kLanes<T> elements of T.
template <class T>
using Vec = typename VecType<T>::type;
template <class T>
inline constexpr int kLanes = kVecBytes / static_cast<int>(sizeof(T));

/// Unaligned load and store (memcpy: no alignment or aliasing assumptions).
template <class T>
inline Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store(T* p, Vec<T> v) {
  std::memcpy(p, &v, sizeof v);
}
/// Stores the first `n` lanes only (n < kLanes<T>).
template <class T>
inline void store_partial(T* p, Vec<T> v, int n) {
  std::memcpy(p, &v, sizeof(T) * static_cast<std::size_t>(n));
}
template <class T>
inline Vec<T> splat(T s) {
  return Vec<T>{} + s;
}
/// Sum of the lanes, in lane order (fixed order: deterministic).
template <class T>
inline T hsum(Vec<T> v) {
  T s = 0;
  for (int i = 0; i < kLanes<T>; ++i) s += v[i];
  return s;
}

}  // namespace tessera::compute::cpu::simd
