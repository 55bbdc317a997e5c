// Test tensors in the memory layouts kernels must accept: data rounded to the dtype, laid out
// contiguously or as strided and narrowed views of a larger buffer of garbage.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "support/test_utils.hpp"
#include "tessera/core/half.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::test {

/// The tolerance of a kernel vs the float64 reference (tensor-scaled, see compare()).
/// bf16/f16: f32's plus one rounding to the 16-bit dtype (u = 2^-8, 2^-11).
inline double rtol_of(core::DType t) {
  if (core::dtype_is_half(t)) return 1e-5 + core::unit_roundoff(t);
  return t == core::DType::F32 ? 1e-5 : 1e-12;
}

/// Uniform values in [lo, hi) rounded to `dtype` (the kernel and the reference see the same data).
inline std::vector<double> values(std::size_t n, std::uint64_t seed, core::DType dtype,
                                  double lo = -1.0, double hi = 1.0) {
  std::vector<double> v = random_doubles(n, seed, lo, hi);
  if (dtype == core::DType::F32)
    for (auto& x : v) x = static_cast<float>(x);
  if (core::dtype_is_half(dtype))
    for (auto& x : v) x = core::half_to_float(core::double_to_half(x, dtype), dtype);
  return v;
}
inline std::size_t numel(const core::Shape& s) {
  return static_cast<std::size_t>(core::shape_numel(s));
}

/// How a test tensor is laid out in memory.
enum class Layout {
  Contiguous,
  NarrowLast,      ///< a window of a tensor 3 wider in the last dim (rows not contiguous)
  NarrowChannels,  ///< a window of a tensor 2 wider in dim 1 (planes contiguous, C stride larger)
  StrideTwo,       ///< every element 2 apart (no unit stride at all)
};
inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous:
      return "contiguous";
    case Layout::NarrowLast:
      return "narrowed last dim";
    case Layout::NarrowChannels:
      return "narrowed dim 1";
    case Layout::StrideTwo:
      return "stride 2";
  }
  return "?";
}

/// A window `t` of the contiguous buffer `base` (the same tensor when contiguous).
struct View {
  core::Tensor t;
  core::Tensor base;
};

/// A view of `shape` holding `v` (row-major) in the given layout; the memory of `base` around
/// the window holds garbage (values in [50, 60)) that a kernel must neither read into its results
/// nor overwrite.
inline View make_view(const std::vector<double>& v, const core::Shape& shape, core::DType dtype,
                      Layout layout = Layout::Contiguous) {
  const core::Tensor dense = from_doubles(v, shape, dtype);
  if (layout == Layout::Contiguous) return {dense, dense};
  View out;
  if (layout == Layout::StrideTwo) {
    out.base = random_tensor({std::int64_t(2 * numel(shape) + 1)}, dtype, 777, 50, 60);
    core::Shape strides = core::contiguous_strides(shape);
    for (auto& s : strides) s *= 2;
    out.t = core::Tensor::from_blob(out.base.raw_data(), shape, dtype,
                                    std::make_shared<core::Tensor>(out.base), strides);
  } else {
    const int d = layout == Layout::NarrowLast ? static_cast<int>(shape.size()) - 1
                                               : (shape.size() > 1 ? 1 : 0);
    core::Shape big = shape;
    big[d] += layout == Layout::NarrowLast ? 3 : 2;
    out.base = random_tensor(big, dtype, 778, 50, 60);
    out.t = out.base.narrow(d, 1, shape[d]);
  }
  out.t.copy_from(dense);
  return out;
}

/// A tensor of `shape` holding `v` (row-major) in the given layout (see make_view).
inline core::Tensor make(const std::vector<double>& v, const core::Shape& shape, core::DType dtype,
                         Layout layout = Layout::Contiguous) {
  return make_view(v, shape, dtype, layout).t;
}
/// An output tensor in the given layout, filled with garbage (or with `v` when given).
inline core::Tensor make_out(const core::Shape& shape, core::DType dtype,
                             Layout layout = Layout::Contiguous,
                             const std::vector<double>& v = {}) {
  return make(v.empty() ? random_doubles(numel(shape), 779, 70, 80) : v, shape, dtype, layout);
}
/// A 1-d f64 tensor of n garbage entries (for the f64 reduction outputs).
inline core::Tensor f64_out(std::int64_t n) { return make_out({n}, core::DType::F64); }

}  // namespace tessera::test
