// Helpers of the non-convolution op tests: central finite differences in float64 (data rounded to
// the dtype and its strided views are in support/views.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/reference/ops_ref.hpp"
#include "support/test_utils.hpp"
#include "support/views.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/compute/ops.hpp"

namespace tessera::test::ops_test {

using compute::cpu::CpuBackend;
using core::DType;
using core::Shape;
using core::Tensor;
using ref::Vec;

/// Central difference of f at x along every coordinate listed in `idx` (all when empty):
/// (f(x + h·e_i) − f(x − h·e_i)) / 2h.
inline Vec numeric_grad(const std::function<double(const Vec&)>& f, Vec x, double h = 1e-6,
                        std::vector<std::size_t> idx = {}) {
  if (idx.empty())
    for (std::size_t i = 0; i < x.size(); ++i) idx.push_back(i);
  Vec g(idx.size());
  for (std::size_t k = 0; k < idx.size(); ++k) {
    const double x0 = x[idx[k]];
    x[idx[k]] = x0 + h;
    const double fp = f(x);
    x[idx[k]] = x0 - h;
    const double fm = f(x);
    x[idx[k]] = x0;
    g[k] = (fp - fm) / (2 * h);
  }
  return g;
}
/// Entries `idx` of v.
inline Vec pick(const Vec& v, const std::vector<std::size_t>& idx) {
  Vec out;
  for (auto i : idx) out.push_back(v[i]);
  return out;
}

/// True when both tensors hold the same bits (as float64, which is lossless for f32 and f64).
inline bool same_bits(const Tensor& a, const Tensor& b) { return to_doubles(a) == to_doubles(b); }

}  // namespace tessera::test::ops_test
