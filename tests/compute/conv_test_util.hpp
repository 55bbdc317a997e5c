// Helpers of the convolution kernel tests: reference geometry ↔ Conv2dParams, seeded data, runs.
#pragma once

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support/reference/conv2d_ref.hpp"
#include "support/test_utils.hpp"
#include "tessera/compute/cpu.hpp"

namespace tessera::test {

using compute::Conv2dParams;
using compute::cpu::ConvAlgo;
using compute::cpu::CpuBackend;

/// The kernel parameters of a reference geometry (its symmetric padding as the top/left offset).
inline Conv2dParams params_of(const ref::Conv2d& c) {
  Conv2dParams p;
  p.kernel_h = c.kh, p.kernel_w = c.kw, p.stride_h = c.sh, p.stride_w = c.sw;
  p.pad_h = c.ph, p.pad_w = c.pw, p.dilation_h = c.dh, p.dilation_w = c.dw, p.groups = c.groups;
  return p;
}

/// "k3x3 s2x2 p1x1 d1x1 g2 x(2,4,11,13) cout 6".
inline std::string describe(const ref::Conv2d& c) {
  std::ostringstream os;
  os << "k" << c.kh << "x" << c.kw << " s" << c.sh << "x" << c.sw << " p" << c.ph << "x" << c.pw
     << " d" << c.dh << "x" << c.dw << " g" << c.groups << " x(" << c.n << "," << c.cin << ","
     << c.h << "," << c.w << ") cout " << c.cout;
  return os.str();
}

/// Values uniform in [-1, 1), rounded to `dtype` (so an f32 kernel and the f64 reference see
/// the same inputs).
inline std::vector<double> random_values(std::size_t n, std::uint64_t seed, core::DType dtype) {
  std::vector<double> v = random_doubles(n, seed);
  if (dtype == core::DType::F32)
    for (auto& x : v) x = static_cast<float>(x);
  return v;
}

/// Inputs of one conv: x, w, b, dy (row-major float64 values).
struct ConvData {
  std::vector<double> x, w, b, dy;
};
inline ConvData make_data(const ref::Conv2d& c, core::DType dtype, std::uint64_t seed) {
  return {random_values(c.x_size(), seed, dtype), random_values(c.w_size(), seed + 1, dtype),
          random_values(std::size_t(c.cout), seed + 2, dtype),
          random_values(c.y_size(), seed + 3, dtype)};
}

/// Forward output and the three gradients, as float64.
struct ConvOut {
  std::vector<double> y, dx, dw, db;
};

/// The float64 reference on the same data.
inline ConvOut reference(const ref::Conv2d& c, const ConvData& d) {
  ref::Conv2dGrads g = ref::conv2d_backward(c, d.x, d.w, d.dy);
  return {ref::conv2d_forward(c, d.x, d.w, d.b), std::move(g.dx), std::move(g.dw), std::move(g.db)};
}

/// Runs forward, backward-data and backward-weight (overwriting, with bias and db) on `be`.
inline ConvOut run_backend(CpuBackend& be, const ref::Conv2d& c, const ConvData& d,
                           core::DType dtype) {
  const Conv2dParams p = params_of(c);
  const core::Tensor x = from_doubles(d.x, {c.n, c.cin, c.h, c.w}, dtype);
  const core::Tensor w = from_doubles(d.w, {c.cout, c.cin / c.groups, c.kh, c.kw}, dtype);
  const core::Tensor b = from_doubles(d.b, {c.cout}, dtype);
  const core::Tensor dy = from_doubles(d.dy, {c.n, c.cout, c.ho(), c.wo()}, dtype);
  core::Tensor y = core::Tensor::empty({c.n, c.cout, c.ho(), c.wo()}, dtype);
  core::Tensor dx = core::Tensor::empty(x.shape(), dtype);
  core::Tensor dw = core::Tensor::empty(w.shape(), dtype);
  core::Tensor db = core::Tensor::empty(b.shape(), dtype);
  be.conv2d_forward(p, x, w, &b, y);
  be.conv2d_backward_data(p, dy, w, dx, false);
  be.conv2d_backward_weight(p, x, dy, dw, &db, false);
  return {to_doubles(y), to_doubles(dx), to_doubles(dw), to_doubles(db)};
}

/// True when the forced algorithm `a` applies to geometry c with its standard output (Onednn: the
/// pointwise geometry or a kernel equal to its stride (patchify), in f32 where this build and CPU
/// run it; it refuses f64).
inline bool algo_applies(ConvAlgo a, const ref::Conv2d& c) {
  switch (a) {
    case ConvAlgo::Depthwise:
      return c.groups == c.cin && c.cin == c.cout;
    case ConvAlgo::Onednn:
      if (!compute::cpu::onednn_runs(core::DType::F32)) return false;
      if (c.kh == c.sh && c.kw == c.sw && c.kh * c.kw > 1 && c.ph == 0 && c.pw == 0 && c.dh == 1 &&
          c.dw == 1)
        return true;
      [[fallthrough]];
    case ConvAlgo::Pointwise:
      return c.kh == 1 && c.kw == 1 && c.sh == 1 && c.sw == 1 && c.ph == 0 && c.pw == 0;
    default:
      return true;
  }
}

}  // namespace tessera::test
