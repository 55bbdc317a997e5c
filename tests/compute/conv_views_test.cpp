// Window semantics, strided views, accumulation and null db of the cpu convolution kernels.
#include <vector>

#include "conv_test_util.hpp"

namespace tessera::test {
namespace {

using core::DType;
using core::Tensor;

constexpr double kSentinel = 7.0;

// All algorithms that apply to a call (Auto included); Onednn where this build and CPU run it in
// f32 (forced Onednn refuses f64: the callers skip it there).
std::vector<ConvAlgo> algos_for(const Conv2dParams& p, int cin, int cout, int h, int w, int ho,
                                int wo) {
  std::vector<ConvAlgo> out = {ConvAlgo::Auto, ConvAlgo::Generic, ConvAlgo::Im2col};
  if (p.groups == cin && cin == cout) out.push_back(ConvAlgo::Depthwise);
  if (p.kernel_h == 1 && p.kernel_w == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 &&
      p.pad_w == 0 && ho == h && wo == w) {
    out.push_back(ConvAlgo::Pointwise);
    if (compute::cpu::onednn_runs(DType::F32)) out.push_back(ConvAlgo::Onednn);
  }
  return out;
}

// Rows [r0, r0 + nr) and columns [c0, c0 + nc) of every (n, c) plane of a row-major (N,C,H,W)
// vector.
std::vector<double> slice(const std::vector<double>& v, const core::Shape& s, int r0, int nr,
                          int c0, int nc) {
  std::vector<double> out;
  for (std::int64_t n = 0; n < s[0] * s[1]; ++n)
    for (int h = r0; h < r0 + nr; ++h)
      for (int w = c0; w < c0 + nc; ++w) out.push_back(v[(n * s[2] + h) * s[3] + w]);
  return out;
}

// Every element of `big` outside the [r0, r0+nr) x [c0, c0+nc) window still holds the sentinel.
bool border_untouched(const Tensor& big, int r0, int nr, int c0, int nc) {
  const std::vector<double> v = to_doubles(big);
  const core::Shape& s = big.shape();
  for (std::int64_t i = 0; i < std::int64_t(v.size()); ++i) {
    const std::int64_t w = i % s[3], h = (i / s[3]) % s[2];
    const bool inside = h >= r0 && h < r0 + nr && w >= c0 && w < c0 + nc;
    if (!inside && v[i] != kSentinel) return false;
  }
  return true;
}

// A window of the output of reference geometry `full` (symmetric pad P): output rows
// [r0, r0 + ho) and columns [c0, c0 + wo). The kernel gets x narrowed to the rows and columns
// the window starts reading at, pad = what remains above/left, y and dx as views into larger
// sentinel-filled buffers; everything must equal the matching slice of the full reference.
void check_window(const ref::Conv2d& full, int r0, int ho, int c0, int wo, DType dtype) {
  const double rtol = dtype == DType::F32 ? 1e-5 : 1e-12;
  ConvData data = make_data(full, dtype, 4242);
  const int fho = full.ho(), fwo = full.wo();
  std::vector<double> dy_full(full.y_size(), 0.0), dy_win;
  for (int n = 0; n < full.n * full.cout; ++n)  // dy is zero outside the window
    for (int h = r0; h < r0 + ho; ++h)
      for (int w = c0; w < c0 + wo; ++w) {
        const std::size_t i = (std::size_t(n) * fho + h) * fwo + w;
        dy_full[i] = data.dy[dy_win.size()];
        dy_win.push_back(dy_full[i]);
      }
  data.dy = dy_full;
  const ConvOut want = reference(full, data);

  const int a = std::max(0, r0 * full.sh - full.ph), b = std::max(0, c0 * full.sw - full.pw);
  Conv2dParams p = params_of(full);
  p.pad_h = full.ph - r0 * full.sh + a;
  p.pad_w = full.pw - c0 * full.sw + b;
  const Tensor x_all = from_doubles(data.x, {full.n, full.cin, full.h, full.w}, dtype);
  const Tensor x = x_all.narrow(2, a, full.h - a).narrow(3, b, full.w - b);
  const Tensor w =
      from_doubles(data.w, {full.cout, full.cin / full.groups, full.kh, full.kw}, dtype);
  const Tensor bias = from_doubles(data.b, {full.cout}, dtype);
  const Tensor dy = from_doubles(dy_win, {full.n, full.cout, ho, wo}, dtype);
  const std::vector<double> want_y = slice(want.y, {full.n, full.cout, fho, fwo}, r0, ho, c0, wo);
  const std::vector<double> want_dx =
      slice(want.dx, {full.n, full.cin, full.h, full.w}, a, full.h - a, b, full.w - b);

  for (ConvAlgo algo : algos_for(p, full.cin, full.cout, int(x.size(2)), int(x.size(3)), ho, wo))
    for (int threads : {1, 3}) {
      if (algo == ConvAlgo::Onednn && dtype != DType::F32) continue;
      INFO("window rows [" << r0 << "," << r0 + ho << ") cols [" << c0 << "," << c0 + wo << ") of "
                           << describe(full) << "; pad " << p.pad_h << "x" << p.pad_w << ", "
                           << compute::cpu::conv_algo_name(algo) << ", " << core::dtype_name(dtype)
                           << ", " << threads << " threads");
      CpuBackend be(threads);
      be.force_conv_algo(algo);
      Tensor y_big = Tensor::empty({full.n, full.cout, ho + 3, wo + 2}, dtype);
      y_big.fill(kSentinel);
      Tensor y = y_big.narrow(2, 2, ho).narrow(3, 1, wo);
      be.conv2d_forward(p, x, w, &bias, y);
      REQUIRE_CLOSE(to_doubles(y), want_y, rtol);
      REQUIRE(border_untouched(y_big, 2, ho, 1, wo));

      Tensor dx_big = Tensor::empty(x_all.shape(), dtype);
      dx_big.fill(kSentinel);
      Tensor dx = dx_big.narrow(2, a, full.h - a).narrow(3, b, full.w - b);
      be.conv2d_backward_data(p, dy, w, dx, false);
      REQUIRE_CLOSE(to_doubles(dx), want_dx, rtol);
      REQUIRE(border_untouched(dx_big, a, full.h - a, b, full.w - b));

      Tensor dw = Tensor::empty(w.shape(), dtype), db = Tensor::empty(bias.shape(), dtype);
      be.conv2d_backward_weight(p, x, dy, dw, &db, false);
      REQUIRE_CLOSE(to_doubles(dw), want.dw, rtol);
      REQUIRE_CLOSE(to_doubles(db), want.db, rtol);
    }
}

TEST_CASE("a smaller or larger output window equals the slice of the full result",
          "[compute][conv]") {
  const DType dtype = GENERATE(DType::F32, DType::F64);
  SECTION("3x3 s1: y taller and wider than the standard output (bottom/right zeros)") {
    // Full reference with pad 3; our pad 1 is its output row 2; 13 rows reach into the bottom pad.
    check_window({2, 4, 11, 13, 6, 3, 3, 1, 1, 3, 3, 1, 1, 1}, 2, 13, 2, 14, dtype);
  }
  SECTION("3x3 s2 p1 groups 2: an interior window") {
    check_window({2, 4, 11, 13, 6, 3, 3, 2, 2, 3, 3, 1, 1, 2}, 3, 3, 2, 5, dtype);
  }
  SECTION("depthwise 7x7 d2: a window starting inside the top padding") {
    check_window({2, 4, 15, 21, 4, 7, 7, 1, 1, 6, 6, 2, 2, 4}, 3, 8, 1, 9, dtype);
  }
  SECTION("depthwise 5x5 s2: window past the bottom-right edge") {
    check_window({1, 3, 12, 17, 3, 5, 5, 2, 2, 4, 4, 1, 1, 3}, 4, 4, 6, 5, dtype);
  }
  SECTION("1x1 on a narrowed input: the pointwise GEMM reads a strided view") {
    // Output (row r, col c) of the pad-2 reference reads x(r − 2, c − 2): rows from 4 read x
    // from 2.
    check_window({2, 6, 9, 12, 5, 1, 1, 1, 1, 2, 2, 1, 1, 1}, 4, 7, 5, 9, dtype);
  }
}

TEST_CASE("channel-narrowed views as inputs and outputs", "[compute][conv]") {
  const DType dtype = GENERATE(DType::F32, DType::F64);
  const double rtol = dtype == DType::F32 ? 1e-5 : 1e-12;
  for (const ref::Conv2d& c : {ref::Conv2d{2, 4, 9, 14, 4, 7, 7, 1, 1, 3, 3, 1, 1, 4},
                               ref::Conv2d{2, 4, 9, 14, 8, 1, 1, 1, 1, 0, 0, 1, 1, 2},
                               ref::Conv2d{2, 4, 9, 14, 6, 3, 3, 2, 1, 1, 1, 1, 1, 1}}) {
    const ConvData data = make_data(c, dtype, 77);
    const ConvOut want = reference(c, data);
    // x is channels [2, 2 + Cin) of a (N, Cin + 3, H, W) tensor; y, dx likewise.
    Tensor x_big = Tensor::zeros({c.n, c.cin + 3, c.h, c.w}, dtype);
    Tensor x = x_big.narrow(1, 2, c.cin);
    x.copy_from(from_doubles(data.x, {c.n, c.cin, c.h, c.w}, dtype));
    const Tensor w = from_doubles(data.w, {c.cout, c.cin / c.groups, c.kh, c.kw}, dtype);
    const Tensor dy = from_doubles(data.dy, {c.n, c.cout, c.ho(), c.wo()}, dtype);
    Tensor y = Tensor::zeros({c.n, c.cout + 1, c.ho(), c.wo()}, dtype).narrow(1, 1, c.cout);
    Tensor dx = Tensor::zeros({c.n, c.cin + 2, c.h, c.w}, dtype).narrow(1, 0, c.cin);
    for (int threads : {1, 2}) {
      INFO(describe(c) << ", " << threads << " threads");
      CpuBackend be(threads);
      be.conv2d_forward(params_of(c), x, w, nullptr, y);
      std::vector<double> want_y = want.y;  // reference has bias; remove it per channel
      for (std::size_t i = 0; i < want_y.size(); ++i)
        want_y[i] -= data.b[(i / (std::size_t(c.ho()) * c.wo())) % c.cout];
      REQUIRE_CLOSE(to_doubles(y), want_y, rtol);
      be.conv2d_backward_data(params_of(c), dy, w, dx, false);
      REQUIRE_CLOSE(to_doubles(dx), want.dx, rtol);
    }
  }
}

TEST_CASE("accumulate adds to the outputs, db may be null", "[compute][conv]") {
  const DType dtype = GENERATE(DType::F32, DType::F64);
  const double rtol = dtype == DType::F32 ? 1e-5 : 1e-12;
  for (const ref::Conv2d& c : {ref::Conv2d{2, 4, 11, 13, 4, 5, 5, 2, 2, 2, 2, 1, 1, 4},
                               ref::Conv2d{2, 4, 11, 13, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2},
                               ref::Conv2d{2, 4, 11, 13, 6, 3, 3, 1, 1, 1, 1, 2, 2, 1}}) {
    const ConvData data = make_data(c, dtype, 31);
    const ConvOut want = reference(c, data);
    const Conv2dParams p = params_of(c);
    const Tensor x = from_doubles(data.x, {c.n, c.cin, c.h, c.w}, dtype);
    const Tensor w = from_doubles(data.w, {c.cout, c.cin / c.groups, c.kh, c.kw}, dtype);
    const Tensor dy = from_doubles(data.dy, {c.n, c.cout, c.ho(), c.wo()}, dtype);
    for (ConvAlgo algo : algos_for(p, c.cin, c.cout, c.h, c.w, c.ho(), c.wo())) {
      if (algo == ConvAlgo::Onednn && dtype != DType::F32) continue;
      INFO(describe(c) << ", " << compute::cpu::conv_algo_name(algo));
      CpuBackend be(2);
      be.force_conv_algo(algo);
      const std::vector<double> dx0 = random_values(c.x_size(), 5, dtype);
      const std::vector<double> dw0 = random_values(c.w_size(), 6, dtype);
      const std::vector<double> db0 = random_values(std::size_t(c.cout), 7, dtype);
      Tensor dx = from_doubles(dx0, x.shape(), dtype), dw = from_doubles(dw0, w.shape(), dtype);
      Tensor db = from_doubles(db0, {c.cout}, dtype);
      be.conv2d_backward_data(p, dy, w, dx, true);
      be.conv2d_backward_weight(p, x, dy, dw, &db, true);
      auto plus = [](std::vector<double> a, const std::vector<double>& b) {
        for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
        return a;
      };
      REQUIRE_CLOSE(to_doubles(dx), plus(dx0, want.dx), rtol);
      REQUIRE_CLOSE(to_doubles(dw), plus(dw0, want.dw), rtol);
      REQUIRE_CLOSE(to_doubles(db), plus(db0, want.db), rtol);

      Tensor dw_only = from_doubles(dw0, w.shape(), dtype);
      be.conv2d_backward_weight(p, x, dy, dw_only, nullptr, false);
      REQUIRE_CLOSE(to_doubles(dw_only), want.dw, rtol);
    }
  }
}

}  // namespace
}  // namespace tessera::test
