// cpu convolution: argument errors, finite-difference gradients, determinism and threading.
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "conv_test_util.hpp"
#include "tessera/core/allocator.hpp"

namespace tessera::test {
namespace {

using Catch::Matchers::Contains;
using core::DType;
using core::Tensor;

TEST_CASE("conv argument errors name the problem", "[compute][conv]") {
  CpuBackend be(2);
  Conv2dParams p;
  p.kernel_h = p.kernel_w = 3;
  p.pad_h = p.pad_w = 1;
  Tensor x = Tensor::zeros({2, 4, 8, 8}), y = Tensor::zeros({2, 6, 8, 8});
  SECTION("channels not divisible by groups") {
    p.groups = 3;
    const Tensor w = Tensor::zeros({6, 1, 3, 3});
    REQUIRE_THAT(error_of<InvalidArgument>([&] { be.conv2d_forward(p, x, w, nullptr, y); }),
                 Contains("not both divisible by groups=3"));
  }
  SECTION("weight with the wrong input channels for the groups") {
    p.groups = 2;
    const Tensor w = Tensor::zeros({6, 4, 3, 3});
    REQUIRE_THAT(error_of<InvalidArgument>([&] { be.conv2d_forward(p, x, w, nullptr, y); }),
                 Contains("expects 8 input channels"));
  }
  SECTION("weight not matching the kernel size") {
    const Tensor w = Tensor::zeros({6, 4, 5, 5});
    Tensor dx = Tensor::zeros(x.shape());
    REQUIRE_THAT(error_of<InvalidArgument>([&] { be.conv2d_backward_data(p, y, w, dx, false); }),
                 Contains("does not match kernel 3x3"));
  }
  SECTION("mixed dtypes") {
    const Tensor w = Tensor::zeros({6, 4, 3, 3}, DType::F64);
    REQUIRE_THAT(error_of<InvalidArgument>([&] { be.conv2d_forward(p, x, w, nullptr, y); }),
                 Contains("mixed dtypes"));
  }
  SECTION("integer tensors are unsupported") {
    const Tensor xi = Tensor::zeros(x.shape(), DType::I32),
                 wi = Tensor::zeros({6, 4, 3, 3}, DType::I32);
    Tensor yi = Tensor::zeros(y.shape(), DType::I32), dwi = Tensor::zeros(wi.shape(), DType::I32);
    REQUIRE_THAT(error_of<Unsupported>([&] { be.conv2d_forward(p, xi, wi, nullptr, yi); }),
                 Contains("dtype i32 is not supported"));
    REQUIRE_THAT(
        error_of<Unsupported>([&] { be.conv2d_backward_weight(p, xi, yi, dwi, nullptr, false); }),
        Contains("conv2d_backward_weight"));
  }
  SECTION("a forced algorithm that does not apply") {
    const Tensor w = Tensor::zeros({6, 4, 3, 3});
    be.force_conv_algo(ConvAlgo::Depthwise);
    REQUIRE_THAT(error_of<InvalidArgument>([&] { be.conv2d_forward(p, x, w, nullptr, y); }),
                 Contains("algorithm 'depthwise' does not apply"));
    be.force_conv_algo(ConvAlgo::Pointwise);
    Tensor dw = Tensor::zeros(w.shape());
    REQUIRE_THAT(
        error_of<InvalidArgument>([&] { be.conv2d_backward_weight(p, x, y, dw, nullptr, false); }),
        Contains("needs a 1x1 kernel"));
  }
  SECTION("a thread count below one") {
    REQUIRE_THAT(error_of<InvalidArgument>([&] { be.set_num_threads(0); }), Contains("at least 1"));
  }
}

// ⟨conv(x, w, b), dy⟩ in float64 through the backend.
double loss(CpuBackend& be, const ref::Conv2d& c, const std::vector<double>& x,
            const std::vector<double>& w, const std::vector<double>& b,
            const std::vector<double>& dy) {
  const Tensor xt = from_doubles(x, {c.n, c.cin, c.h, c.w}, DType::F64);
  const Tensor wt = from_doubles(w, {c.cout, c.cin / c.groups, c.kh, c.kw}, DType::F64);
  const Tensor bt = from_doubles(b, {c.cout}, DType::F64);
  Tensor y = Tensor::empty({c.n, c.cout, c.ho(), c.wo()}, DType::F64);
  be.conv2d_forward(params_of(c), xt, wt, &bt, y);
  return dot(to_doubles(y), dy);
}

// Central differences of the loss in each entry of v (eps 1e-6).
template <class Loss>
std::vector<double> numeric_gradient(std::vector<double> v, Loss&& f) {
  const double eps = 1e-6;
  std::vector<double> g(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double v0 = v[i];
    v[i] = v0 + eps;
    const double up = f(v);
    v[i] = v0 - eps;
    const double down = f(v);
    v[i] = v0;
    g[i] = (up - down) / (2 * eps);
  }
  return g;
}

TEST_CASE("conv gradients match central finite differences in float64", "[compute][conv]") {
  const ConvAlgo algo = GENERATE(ConvAlgo::Auto, ConvAlgo::Generic, ConvAlgo::Im2col);
  // Inputs of at most 64 elements: strided + padded, dilated depthwise, grouped 1x1.
  for (const ref::Conv2d& c : {ref::Conv2d{2, 2, 4, 4, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1},
                               ref::Conv2d{1, 4, 4, 4, 4, 3, 3, 1, 1, 2, 2, 2, 2, 4},
                               ref::Conv2d{2, 4, 2, 4, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2}}) {
    INFO(describe(c) << ", " << compute::cpu::conv_algo_name(algo));
    const ConvData d = make_data(c, DType::F64, 55);
    CpuBackend be(2);
    be.force_conv_algo(algo);
    const ConvOut got = run_backend(be, c, d, DType::F64);
    REQUIRE_CLOSE(got.dx,
                  numeric_gradient(d.x, [&](auto& v) { return loss(be, c, v, d.w, d.b, d.dy); }),
                  1e-6);
    REQUIRE_CLOSE(got.dw,
                  numeric_gradient(d.w, [&](auto& v) { return loss(be, c, d.x, v, d.b, d.dy); }),
                  1e-6);
    REQUIRE_CLOSE(got.db,
                  numeric_gradient(d.b, [&](auto& v) { return loss(be, c, d.x, d.w, v, d.dy); }),
                  1e-6);
  }
}

// Raw bytes of every output of a forward + backward run.
std::vector<unsigned char> run_bits(CpuBackend& be, const ref::Conv2d& c, const ConvData& d) {
  const ConvOut o = run_backend(be, c, d, DType::F32);
  std::vector<unsigned char> bits;
  for (const auto* v : {&o.y, &o.dx, &o.dw, &o.db}) {
    const auto* p = reinterpret_cast<const unsigned char*>(v->data());
    bits.insert(bits.end(), p, p + v->size() * sizeof(double));
  }
  return bits;
}

const std::vector<ref::Conv2d>& determinism_cases() {
  static const std::vector<ref::Conv2d> cases = {
      {2, 8, 19, 37, 8, 7, 7, 1, 1, 3, 3, 1, 1, 8},
      {2, 8, 19, 37, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {2, 8, 19, 37, 12, 3, 3, 2, 2, 1, 1, 1, 1, 2},
      {2, 8, 19, 37, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1},
  };
  return cases;
}

TEST_CASE("same inputs and thread count give identical bits", "[compute][conv]") {
  const ConvAlgo algo = GENERATE(ConvAlgo::Auto, ConvAlgo::Im2col);
  const int threads = GENERATE(1, 2, 3);
  for (const ref::Conv2d& c : determinism_cases()) {
    INFO(describe(c) << ", " << compute::cpu::conv_algo_name(algo) << ", " << threads
                     << " threads");
    const ConvData d = make_data(c, DType::F32, 99);
    CpuBackend a(threads), b(threads);
    a.force_conv_algo(algo);
    b.force_conv_algo(algo);
    const auto first = run_bits(a, c, d);
    REQUIRE(run_bits(a, c, d) == first);
    REQUIRE(run_bits(b, c, d) == first);
  }
}

TEST_CASE("ranks may run their own backends concurrently", "[compute][conv]") {
  // Tensors are made here and results checked here: Catch2's macros are not thread-safe, so
  // the rank threads only call the backends.
  const ref::Conv2d c = determinism_cases()[0];
  const ConvData d = make_data(c, DType::F32, 3);
  const Conv2dParams p = params_of(c);
  const Tensor x = from_doubles(d.x, {c.n, c.cin, c.h, c.w}, DType::F32);
  const Tensor w = from_doubles(d.w, {c.cout, c.cin / c.groups, c.kh, c.kw}, DType::F32);
  const Tensor dy = from_doubles(d.dy, {c.n, c.cout, c.ho(), c.wo()}, DType::F32);
  struct Outputs {
    Tensor y, dx, dw;
  };
  auto make_outputs = [&] {
    return Outputs{Tensor::empty({c.n, c.cout, c.ho(), c.wo()}), Tensor::empty(x.shape()),
                   Tensor::empty(w.shape())};
  };
  auto run = [&](CpuBackend& be, Outputs& o) {
    be.conv2d_forward(p, x, w, nullptr, o.y);
    be.conv2d_backward_data(p, dy, w, o.dx, false);
    be.conv2d_backward_weight(p, x, dy, o.dw, nullptr, false);
  };
  CpuBackend serial(2);
  Outputs want = make_outputs();
  run(serial, want);
  std::vector<Outputs> got;
  for (int r = 0; r < 3; ++r) got.push_back(make_outputs());
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      CpuBackend be(2);
      for (int rep = 0; rep < 2; ++rep) run(be, got[r]);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 3; ++r) {
    REQUIRE(to_doubles(got[r].y) == to_doubles(want.y));
    REQUIRE(to_doubles(got[r].dx) == to_doubles(want.dx));
    REQUIRE(to_doubles(got[r].dw) == to_doubles(want.dw));
  }
}

TEST_CASE("scratch memory is booked as workspace with the input's allocator", "[compute][conv]") {
  const ConvAlgo algo =
      GENERATE(ConvAlgo::Depthwise, ConvAlgo::Pointwise, ConvAlgo::Im2col, ConvAlgo::Onednn);
  // Onednn where this build and CPU run it (conv_onednn_test.cpp prints the skip elsewhere).
  if (algo == ConvAlgo::Onednn && !compute::cpu::onednn_runs(DType::F32)) return;
  const ref::Conv2d c = algo == ConvAlgo::Depthwise ? determinism_cases()[0]
                        : algo == ConvAlgo::Im2col  ? determinism_cases()[2]
                                                    : determinism_cases()[1];
  INFO(describe(c) << ", " << compute::cpu::conv_algo_name(algo));
  auto alloc = std::make_shared<core::Allocator>("rank0");
  const auto ws = core::MemCategory::Workspace;
  const Tensor x =
      Tensor::zeros({c.n, c.cin, c.h, c.w}, DType::F32, core::MemCategory::Activation, alloc);
  const Tensor w = Tensor::zeros({c.cout, c.cin / c.groups, c.kh, c.kw}, DType::F32,
                                 core::MemCategory::Parameter, alloc);
  Tensor y = Tensor::zeros({c.n, c.cout, c.ho(), c.wo()}, DType::F32, core::MemCategory::Activation,
                           alloc);
  Tensor dw = Tensor::zeros(w.shape(), DType::F32, core::MemCategory::Gradient, alloc);
  CpuBackend be(2);
  be.force_conv_algo(algo);
  alloc->reset_peaks();
  be.conv2d_forward(params_of(c), x, w, nullptr, y);
  be.conv2d_backward_weight(params_of(c), x, y, dw, nullptr, false);
  const core::MemStats s = alloc->stats();
  REQUIRE(s.peak_of(ws) > 0);
  REQUIRE(s.current_of(ws) == 0);
}

int thread_count() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

TEST_CASE("one thread starts no threads, n threads start n - 1 workers", "[compute][conv]") {
  if (!std::filesystem::exists("/proc/self/task")) return;  // not Linux: nothing to count
  const ref::Conv2d c = determinism_cases()[2];
  const ConvData d = make_data(c, DType::F32, 4);
  // ThreadSanitizer's runtime starts its own background thread with the process's first thread;
  // one thread started and joined first makes `before` count it (elsewhere this changes nothing).
  std::thread([] {}).join();
  const int before = thread_count();
  {
    CpuBackend one(1);
    run_bits(one, c, d);
    REQUIRE(thread_count() == before);
  }
  CpuBackend three(3);
  run_bits(three, c, d);
  REQUIRE(thread_count() == before + 2);
}

}  // namespace
}  // namespace tessera::test
