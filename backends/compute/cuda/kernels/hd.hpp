// TESSERA_HD (host + device under nvcc, nothing under a host compiler) and the few math calls the
// kernel bodies make, spelled so that g++ and nvcc both accept them in host and device code.
#pragma once

#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define TESSERA_HD __host__ __device__
#else
#define TESSERA_HD
#endif

namespace tessera::compute::cuda::kernels {

// The C library's functions by type: CUDA declares float and double overloads of the global ones
// for device code, and the host compilers have them from <math.h>.
TESSERA_HD inline float k_exp(float x) { return ::expf(x); }
TESSERA_HD inline double k_exp(double x) { return ::exp(x); }
TESSERA_HD inline float k_erf(float x) { return ::erff(x); }
TESSERA_HD inline double k_erf(double x) { return ::erf(x); }
TESSERA_HD inline float k_sqrt(float x) { return ::sqrtf(x); }
TESSERA_HD inline double k_sqrt(double x) { return ::sqrt(x); }
TESSERA_HD inline double k_log(double x) { return ::log(x); }
TESSERA_HD inline double k_pow(double x, double y) { return ::pow(x, y); }

/// a / b for index math (a ≥ 0, b > 0): 32-bit division where both fit (the GPU has no 64-bit
/// divider; a 64-bit one costs several times the instructions of a 32-bit one).
TESSERA_HD inline std::int64_t k_div(std::int64_t a, std::int64_t b) {
  if (((a | b) >> 32) == 0) return std::int64_t(std::uint32_t(a) / std::uint32_t(b));
  return a / b;
}

template <class T>
TESSERA_HD inline T k_max(T a, T b) {
  return a > b ? a : b;
}
template <class T>
TESSERA_HD inline T k_min(T a, T b) {
  return a < b ? a : b;
}

}  // namespace tessera::compute::cuda::kernels
