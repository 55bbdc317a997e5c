// Vectorised e^x and erf for float lanes (activations, softmax): a few ulp, no libm calls;
// double lanes call the C library lane by lane (f64 serves tests, where accuracy matters more).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops_simd.hpp"

namespace tessera::compute::cpu::ops {

typedef std::int32_t IVecF __attribute__((vector_size(simd::kVecBytes)));

TESSERA_OPS_INLINE Vec<float> vmin(Vec<float> a, Vec<float> b) { return a < b ? a : b; }
TESSERA_OPS_INLINE Vec<float> vmax(Vec<float> a, Vec<float> b) { return a > b ? a : b; }

/// e^x for float lanes (Cephes expf): x = n·ln2 + r with |r| ≤ ln2/2, a degree-6 polynomial for
/// e^r, 2^n put into the exponent bits. x is clamped to [-87.3, 88.37] (results ≥ 1.2e-38).
TESSERA_OPS_INLINE Vec<float> exp_lanes(Vec<float> x) {
  x = vmin(vmax(x, vsplat(-87.3f)), vsplat(88.37f));
  const Vec<float> magic = vsplat(12582912.0f);  // 1.5·2^23: adding it rounds to an integer
  const Vec<float> n = (x * 1.44269504088896341f + magic) - magic;
  Vec<float> r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  Vec<float> p = vsplat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const Vec<float> e = p * (r * r) + r + 1.0f;
  const IVecF bits = (__builtin_convertvector(n, IVecF) + 127) << 23;
  Vec<float> scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return e * scale;
}

/// erf for float lanes: the rational minimax approximation x·P(x²)/Q(x²) on [-4, 4] used by
/// XLA and Eigen (absolute error < 5e-7; |erf| ≥ 1 − 2e-8 outside).
TESSERA_OPS_INLINE Vec<float> erf_lanes(Vec<float> x) {
  x = vmin(vmax(x, vsplat(-4.0f)), vsplat(4.0f));
  const Vec<float> x2 = x * x;
  Vec<float> p = vsplat(-2.72614225801306e-10f);
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  Vec<float> q = vsplat(-1.45660718464996e-05f);
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return x * p / q;
}

/// The same for double lanes, through the C library.
TESSERA_OPS_INLINE Vec<double> exp_lanes(Vec<double> x) {
  for (int i = 0; i < kLanes<double>; ++i) x[i] = std::exp(x[i]);
  return x;
}
TESSERA_OPS_INLINE Vec<double> erf_lanes(Vec<double> x) {
  for (int i = 0; i < kLanes<double>; ++i) x[i] = std::erf(x[i]);
  return x;
}

}  // namespace tessera::compute::cpu::ops
