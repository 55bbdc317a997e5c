// Patchify convolutions (kernel == stride, no padding) through oneDNN (conv_onednn_patch.cpp)
// against the float64 reference: f32 forced and under Auto, bf16 through the typed entry points
// with a bound derived from the arithmetic, the data gradient's uncovered rows and columns, and
// independence of the thread count.
#include <cmath>
#include <vector>

#include "conv_test_util.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/core/half.hpp"

namespace tessera::test {
namespace {

using core::DType;
using core::Tensor;

// Patchify geometries: the stem (4×4), downsampling (2×2, groups 2), a non-square kernel, and
// extents that leave rows and columns no patch covers.
std::vector<ref::Conv2d> patch_grid() {
  return {{2, 3, 16, 17, 5, 4, 4, 4, 4, 0, 0, 1, 1, 1},
          {1, 8, 9, 10, 6, 2, 2, 2, 2, 0, 0, 1, 1, 2},
          {3, 4, 7, 11, 4, 3, 2, 3, 2, 0, 0, 1, 1, 1},
          {2, 6, 8, 8, 10, 2, 2, 2, 2, 0, 0, 1, 1, 1},
          {1, 5, 130, 66, 7, 2, 2, 2, 2, 0, 0, 1, 1, 1}};  // more pixels than one block
}

std::vector<double> abs_of(std::vector<double> v) {
  for (double& x : v) x = std::abs(x);
  return v;
}

std::vector<double> rounded(std::vector<double> v, DType t) {
  for (double& x : v) x = core::half_to_float(core::double_to_half(x, t), t);
  return v;
}

// γ_m·|a| + u·|r| per element: an f32 sum of m terms of magnitude sum |a|, rounded once more
// to a 16-bit dtype of unit roundoff u (u = 0: not rounded).
std::vector<double> bound(const std::vector<double>& abs_terms, const std::vector<double>& ref,
                          std::int64_t m, double u) {
  std::vector<double> out(ref.size());
  const double g = gamma_bound(DType::F32, m);
  for (std::size_t i = 0; i < ref.size(); ++i)
    out[i] = g * abs_terms[i] * (1 + u) + u * std::abs(ref[i]) + 1e-30;
  return out;
}

// Ends the test case as skipped (saying why) where this build and CPU do not run dtype t on oneDNN.
#define SKIP_WITHOUT_ONEDNN(t)                                                                  \
  if (!compute::cpu::onednn_runs(t))                                                            \
  TESSERA_SKIP("oneDNN does not run "                                                           \
               << core::dtype_name(t) << " here: "                                              \
               << (compute::cpu::onednn_info().built ? compute::cpu::onednn_info().why_not_bf16 \
                                                     : "built without oneDNN"))

}  // namespace

TEST_CASE("onednn patchify convolutions in f32 match the float64 reference",
          "[compute][conv][onednn]") {
  SKIP_WITHOUT_ONEDNN(DType::F32);
  std::uint64_t seed = 700;
  for (const ref::Conv2d& c : patch_grid()) {
    const ConvData data = make_data(c, DType::F32, seed += 10);
    const ConvOut want = reference(c, data);
    ConvOut first;
    for (int threads : {1, 2, 3}) {
      INFO(describe(c) << ", " << threads << " threads");
      for (ConvAlgo algo : {ConvAlgo::Onednn, ConvAlgo::Auto}) {
        CpuBackend be(threads);
        be.force_conv_algo(algo);
        REQUIRE(CpuBackend::pick_conv_algo(
                    params_of(c), from_doubles(data.x, {c.n, c.cin, c.h, c.w}, DType::F32),
                    Tensor::zeros({c.cout, c.cin / c.groups, c.kh, c.kw})) == ConvAlgo::Onednn);
        const ConvOut got = run_backend(be, c, data, DType::F32);
        REQUIRE_CLOSE(got.y, want.y, 1e-5);
        REQUIRE_CLOSE(got.dx, want.dx, 1e-5);
        REQUIRE_CLOSE(got.dw, want.dw, 1e-5);
        REQUIRE_CLOSE(got.db, want.db, 1e-5);
        // Forward and data gradient: blocks fixed by the geometry, so the same bits on any threads.
        if (threads == 1 && algo == ConvAlgo::Onednn) first = got;
        REQUIRE(got.y == first.y);
        REQUIRE(got.dx == first.dx);
      }
    }
  }
}

TEST_CASE("onednn patchify data gradients accumulate and leave uncovered rows alone",
          "[compute][conv][onednn]") {
  SKIP_WITHOUT_ONEDNN(DType::F32);
  const ref::Conv2d c{1, 8, 9, 10, 6, 2, 2, 2, 2, 0, 0, 1, 1, 2};  // row 8 is in no patch
  const ConvData data = make_data(c, DType::F32, 31);
  const ConvOut want = reference(c, data);
  const std::vector<double> old = random_values(c.x_size(), 32, DType::F32);
  CpuBackend be(2);
  be.force_conv_algo(ConvAlgo::Onednn);
  const Tensor w = from_doubles(data.w, {c.cout, c.cin / c.groups, c.kh, c.kw}, DType::F32);
  const Tensor dy = from_doubles(data.dy, {c.n, c.cout, c.ho(), c.wo()}, DType::F32);
  Tensor dx = from_doubles(old, {c.n, c.cin, c.h, c.w}, DType::F32);
  be.conv2d_backward_data(params_of(c), dy, w, dx, true);
  std::vector<double> sum = old;
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += want.dx[i];
  REQUIRE_CLOSE(to_doubles(dx), sum, 1e-5);
  // Overwriting: the uncovered row is zero, whatever was there.
  be.conv2d_backward_data(params_of(c), dy, w, dx, false);
  const std::vector<double> got = to_doubles(dx);
  for (int ch = 0; ch < c.cin; ++ch)
    for (int x = 0; x < c.w; ++x) REQUIRE(got[std::size_t((ch * c.h + 8) * c.w + x)] == 0.0);
  REQUIRE_CLOSE(got, want.dx, 1e-5);
}

TEST_CASE("onednn patchify convolutions in bf16 are within the bound of bf16 operands and f32 sums",
          "[compute][conv][onednn][half]") {
  SKIP_WITHOUT_ONEDNN(DType::BF16);
  std::uint64_t seed = 900;
  for (const ref::Conv2d& c : patch_grid())
    for (int threads : {1, 3}) {
      INFO(describe(c) << ", " << threads << " threads");
      ConvData data = make_data(c, DType::F32, seed += 10);
      data.x = rounded(data.x, DType::BF16);
      data.dy = rounded(data.dy, DType::BF16);
      // What the kernel multiplies: bf16 activations and the f32 weights and bias rounded to bf16
      // (CpuBackend::capabilities().rounds_master_to_call_dtype).
      ConvData as_used = data;
      as_used.w = rounded(data.w, DType::BF16);
      as_used.b = rounded(data.b, DType::BF16);
      const ConvOut want = reference(c, as_used);
      const ConvOut mag = reference(
          c, {abs_of(as_used.x), abs_of(as_used.w), abs_of(as_used.b), abs_of(as_used.dy)});
      CpuBackend be(threads);
      REQUIRE(be.capabilities().rounds_master_to_call_dtype);
      const Conv2dParams p = params_of(c);
      const Tensor x = from_doubles(data.x, {c.n, c.cin, c.h, c.w}, DType::BF16);
      const Tensor dy = from_doubles(data.dy, {c.n, c.cout, c.ho(), c.wo()}, DType::BF16);
      const Tensor w = from_doubles(data.w, {c.cout, c.cin / c.groups, c.kh, c.kw}, DType::F32);
      const Tensor b = from_doubles(data.b, {c.cout}, DType::F32);
      Tensor y = Tensor::empty(dy.shape(), DType::BF16), dx = Tensor::empty(x.shape(), DType::BF16);
      Tensor dw = Tensor::empty(w.shape(), DType::F32), db = Tensor::empty(b.shape(), DType::F32);
      compute::conv2d_forward(be, p, x, w, &b, y);
      compute::conv2d_backward_data(be, p, dy, w, dx, false);
      compute::conv2d_backward_weight(be, p, x, dy, dw, &db, false);
      const double u = core::unit_roundoff(DType::BF16);
      const std::int64_t k = std::int64_t(c.cin / c.groups) * c.kh * c.kw,
                         pixels = std::int64_t(c.n) * c.ho() * c.wo();
      REQUIRE_WITHIN(to_doubles(y), want.y, bound(mag.y, want.y, k + 1, u));
      REQUIRE_WITHIN(to_doubles(dx), want.dx, bound(mag.dx, want.dx, c.cout / c.groups, u));
      // dw and db stay f32: per-thread partial sums added in order, never rounded to 16 bits.
      REQUIRE_WITHIN(to_doubles(dw), want.dw, bound(mag.dw, want.dw, pixels + threads, 0));
      REQUIRE_WITHIN(to_doubles(db), want.db, bound(mag.db, want.db, pixels + threads, 0));
    }
}

}  // namespace tessera::test
