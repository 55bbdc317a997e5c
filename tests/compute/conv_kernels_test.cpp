// Every cpu convolution algorithm against the naive float64 reference, forward and gradients.
#include <vector>

#include "conv_test_util.hpp"

namespace tessera::test {
namespace {

using core::DType;

// The grid: k in {1,3,5,7}, s in {1,2}, p in {0,k/2}, d in {1,2}, groups in {1,2,C} on odd sizes,
// plus a few geometries that differ between H and W.
std::vector<ref::Conv2d> geometry_grid() {
  std::vector<ref::Conv2d> out;
  const int c = 4;
  for (int k : {1, 3, 5, 7})
    for (int s : {1, 2})
      for (int pad : {0, k / 2})
        for (int d : {1, 2})
          for (int g : {1, 2, c}) {
            ref::Conv2d r{2, c, 11, 13, g == c ? c : 6, k, k, s, s, pad, pad, d, d, g};
            if (r.ho() >= 1 && r.wo() >= 1) out.push_back(r);
          }
  out.push_back({2, 4, 11, 13, 6, 3, 5, 1, 2, 1, 2, 2, 1, 2});
  out.push_back({2, 4, 11, 13, 4, 5, 3, 2, 1, 2, 0, 1, 2, 4});
  out.push_back({2, 4, 11, 13, 8, 3, 3, 2, 2, 1, 1, 1, 1, 4});  // channel multiplier 2
  out.push_back({1, 3, 9, 10, 6, 1, 1, 1, 1, 0, 0, 3, 1, 3});
  out.push_back({2, 3, 16, 17, 5, 4, 4, 4, 4, 0, 0, 1, 1, 1});  // patchify stem
  return out;
}

TEST_CASE("cpu conv algorithms match the float64 reference", "[compute][conv]") {
  const ConvAlgo algo = GENERATE(ConvAlgo::Generic, ConvAlgo::Depthwise, ConvAlgo::Pointwise,
                                 ConvAlgo::Im2col, ConvAlgo::Auto, ConvAlgo::Onednn);
  const DType dtype = GENERATE(DType::F32, DType::F64);
  // Forced Onednn takes f32 only (f64 stays on Eigen), where this build and CPU run it
  // (conv_onednn_test.cpp prints the skip where they do not).
  if (algo == ConvAlgo::Onednn && (dtype != DType::F32 || !compute::cpu::onednn_runs(dtype)))
    return;
  const double rtol = dtype == DType::F32 ? 1e-5 : 1e-12;
  const std::vector<int> thread_counts =
      algo == ConvAlgo::Generic ? std::vector<int>{1, 2} : std::vector<int>{1, 2, 3};
  int checked = 0;
  std::uint64_t seed = 100;
  for (const ref::Conv2d& c : geometry_grid()) {
    if (!algo_applies(algo, c)) continue;
    const ConvData data = make_data(c, dtype, seed += 10);
    const ConvOut want = reference(c, data);
    for (int threads : thread_counts) {
      INFO("algorithm " << compute::cpu::conv_algo_name(algo) << ", " << core::dtype_name(dtype)
                        << ", " << describe(c) << ", " << threads << " threads");
      CpuBackend be(threads);
      be.force_conv_algo(algo);
      const ConvOut got = run_backend(be, c, data, dtype);
      REQUIRE_CLOSE(got.y, want.y, rtol);
      REQUIRE_CLOSE(got.dx, want.dx, rtol);
      REQUIRE_CLOSE(got.dw, want.dw, rtol);
      REQUIRE_CLOSE(got.db, want.db, rtol);
    }
    ++checked;
  }
  // Depthwise applies to the groups == C rows of the grid, Pointwise to the 1x1 s1 p0 ones, Onednn
  // to those and the patchify stem.
  REQUIRE(checked >= (algo == ConvAlgo::Pointwise ? 6 : algo == ConvAlgo::Onednn ? 7 : 30));
}

TEST_CASE("cpu conv algorithms match the reference on wider images", "[compute][conv]") {
  // Wide enough for the vector blocks of every width class (8, 4 and 1 vectors plus a tail) and
  // for several row blocks per plane.
  const DType dtype = GENERATE(DType::F32, DType::F64);
  const double rtol = dtype == DType::F32 ? 1e-5 : 1e-12;
  const std::vector<ref::Conv2d> cases = {
      {1, 3, 23, 211, 3, 7, 7, 1, 1, 3, 3, 1, 1, 3},
      {2, 2, 21, 150, 2, 3, 5, 2, 3, 1, 2, 2, 1, 2},
      {1, 8, 9, 77, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {1, 6, 13, 40, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2},
  };
  std::uint64_t seed = 7;
  for (const ref::Conv2d& c : cases) {
    const ConvData data = make_data(c, dtype, seed += 10);
    const ConvOut want = reference(c, data);
    for (ConvAlgo algo : {ConvAlgo::Auto, ConvAlgo::Im2col})
      for (int threads : {1, 2}) {
        INFO(compute::cpu::conv_algo_name(algo)
             << ", " << describe(c) << ", " << threads << " threads");
        CpuBackend be(threads);
        be.force_conv_algo(algo);
        const ConvOut got = run_backend(be, c, data, dtype);
        REQUIRE_CLOSE(got.y, want.y, rtol);
        REQUIRE_CLOSE(got.dx, want.dx, rtol);
        REQUIRE_CLOSE(got.dw, want.dw, rtol);
        REQUIRE_CLOSE(got.db, want.db, rtol);
      }
  }
}

TEST_CASE("Auto picks the fast path that applies", "[compute][conv]") {
  using core::Tensor;
  const Tensor x = Tensor::zeros({2, 8, 10, 12});
  Conv2dParams p;
  p.kernel_h = p.kernel_w = 7;
  p.pad_h = p.pad_w = 3;
  p.groups = 8;
  REQUIRE(CpuBackend::pick_conv_algo(p, x, Tensor::zeros({8, 1, 7, 7})) == ConvAlgo::Depthwise);
  Conv2dParams q;
  // f32 1x1 convolutions go to oneDNN where this build and CPU run it; f64 ones to Eigen.
  const ConvAlgo pw32 =
      compute::cpu::onednn_runs(core::DType::F32) ? ConvAlgo::Onednn : ConvAlgo::Pointwise;
  REQUIRE(CpuBackend::pick_conv_algo(q, x, Tensor::zeros({32, 8, 1, 1})) == pw32);
  const Tensor x64 = Tensor::zeros({2, 8, 10, 12}, core::DType::F64);
  REQUIRE(CpuBackend::pick_conv_algo(q, x64, Tensor::zeros({32, 8, 1, 1}, core::DType::F64)) ==
          ConvAlgo::Pointwise);
  q.groups = 2;
  REQUIRE(CpuBackend::pick_conv_algo(q, x, Tensor::zeros({32, 4, 1, 1})) == pw32);
  // A 1x1 conv whose output window is smaller than the input is not a plain GEMM.
  REQUIRE(CpuBackend::pick_conv_algo(q, x, Tensor::zeros({32, 4, 1, 1}),
                                     Tensor::zeros({2, 32, 9, 12})) == ConvAlgo::Im2col);
  Conv2dParams r;
  r.kernel_h = r.kernel_w = 3;
  r.stride_h = r.stride_w = 2;
  r.pad_h = r.pad_w = 1;
  REQUIRE(CpuBackend::pick_conv_algo(r, x, Tensor::zeros({16, 8, 3, 3})) == ConvAlgo::Im2col);
}

TEST_CASE("slow sweep: larger convolutions against the reference", "[compute][conv][.slow]") {
  const std::vector<ref::Conv2d> cases = {
      {2, 16, 32, 96, 16, 7, 7, 1, 1, 3, 3, 1, 1, 16},
      {2, 16, 32, 64, 64, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {2, 16, 31, 45, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1},
      {1, 3, 64, 128, 16, 4, 4, 4, 4, 0, 0, 1, 1, 1},
      {2, 12, 33, 70, 12, 5, 5, 2, 1, 4, 4, 2, 2, 12},
  };
  std::uint64_t seed = 900;
  for (const ref::Conv2d& c : cases)
    for (DType dtype : {DType::F32, DType::F64}) {
      const double rtol = dtype == DType::F32 ? 1e-5 : 1e-12;
      const ConvData data = make_data(c, dtype, seed += 10);
      const ConvOut want = reference(c, data);
      for (int threads : {1, 2, 4}) {
        INFO(describe(c) << ", " << core::dtype_name(dtype) << ", " << threads << " threads");
        CpuBackend be(threads);
        const ConvOut got = run_backend(be, c, data, dtype);
        REQUIRE_CLOSE(got.y, want.y, rtol);
        REQUIRE_CLOSE(got.dx, want.dx, rtol);
        REQUIRE_CLOSE(got.dw, want.dw, rtol);
        REQUIRE_CLOSE(got.db, want.db, rtol);
      }
    }
}

}  // namespace
}  // namespace tessera::test
