// Helpers of the non-convolution op tests: data rounded to the dtype, strided views of it, and
// central finite differences in float64.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/reference/ops_ref.hpp"
#include "support/test_utils.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/compute/ops.hpp"

namespace tessera::test::ops_test {

using compute::cpu::CpuBackend;
using core::DType;
using core::Shape;
using core::Tensor;
using ref::Vec;

/// The tolerance of a kernel vs the float64 reference (tensor-scaled, see compare()).
inline double rtol_of(DType t) { return t == DType::F32 ? 1e-5 : 1e-12; }

/// Uniform values in [lo, hi) rounded to `dtype` (the kernel and the reference see the same data).
inline Vec values(std::size_t n, std::uint64_t seed, DType dtype, double lo = -1.0, double hi = 1.0) {
  Vec v = random_doubles(n, seed, lo, hi);
  if (dtype == DType::F32)
    for (auto& x : v) x = static_cast<float>(x);
  return v;
}
inline std::size_t numel(const Shape& s) { return static_cast<std::size_t>(core::shape_numel(s)); }

/// How a test tensor is laid out in memory.
enum class Layout {
  Contiguous,
  NarrowLast,      ///< a window of a tensor 3 wider in the last dim (rows not contiguous)
  NarrowChannels,  ///< a window of a tensor 2 wider in dim 1 (planes contiguous, C stride larger)
  StrideTwo,       ///< every element 2 apart (no unit stride at all)
};
inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::NarrowLast: return "narrowed last dim";
    case Layout::NarrowChannels: return "narrowed dim 1";
    case Layout::StrideTwo: return "stride 2";
  }
  return "?";
}

/// A tensor of `shape` holding `v` (row-major) in the given layout; the memory around the window
/// holds garbage that a kernel must not read into its results.
inline Tensor make(const Vec& v, const Shape& shape, DType dtype, Layout layout = Layout::Contiguous) {
  const Tensor dense = from_doubles(v, shape, dtype);
  if (layout == Layout::Contiguous) return dense;
  Tensor t;
  if (layout == Layout::StrideTwo) {
    auto buf = std::make_shared<Tensor>(random_tensor({std::int64_t(2 * numel(shape) + 1)}, dtype, 777, 50, 60));
    Shape strides = core::contiguous_strides(shape);
    for (auto& s : strides) s *= 2;
    t = Tensor::from_blob(buf->raw_data(), shape, dtype, buf, strides);
  } else {
    const int d = layout == Layout::NarrowLast ? static_cast<int>(shape.size()) - 1 : (shape.size() > 1 ? 1 : 0);
    Shape big = shape;
    big[d] += layout == Layout::NarrowLast ? 3 : 2;
    t = random_tensor(big, dtype, 778, 50, 60).narrow(d, 1, shape[d]);
  }
  t.copy_from(dense);
  return t;
}
/// An output tensor in the given layout, filled with garbage (or with `v` when given).
inline Tensor make_out(const Shape& shape, DType dtype, Layout layout = Layout::Contiguous, const Vec& v = {}) {
  return make(v.empty() ? random_doubles(numel(shape), 779, 70, 80) : v, shape, dtype, layout);
}
/// A 1-d f64 tensor of n garbage entries (for the f64 reduction outputs).
inline Tensor f64_out(std::int64_t n) { return make_out({n}, DType::F64); }

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
