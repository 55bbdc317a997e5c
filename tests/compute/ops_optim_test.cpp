// Optimizer kernels vs hand-computed updates, sum of squares, and the dtype errors of the cpu ops.
#include <string>

#include "ops_test_util.hpp"

namespace tessera::test::ops_test {
namespace {

using namespace tessera::compute;

TEST_CASE("sgd_step matches the reference update over several steps", "[ops]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  const int threads = GENERATE(1, 2);
  const double momentum = GENERATE(0.0, 0.9), wd = GENERATE(0.0, 0.05);
  const bool nesterov = GENERATE(false, true);
  INFO(core::dtype_name(dt) << " momentum " << momentum << " wd " << wd << (nesterov ? " nesterov" : ""));
  const std::size_t n = 40000;
  CpuBackend be(threads);
  Vec p = values(n, 151, dt), buf(n, 0.0);
  Tensor pt = make(p, {std::int64_t(n)}, dt), bt = Tensor::zeros({std::int64_t(n)}, dt);
  for (int step = 0; step < 3; ++step) {
    const Vec g = values(n, 152 + step, dt);
    sgd_step(be, pt, make(g, {std::int64_t(n)}, dt), bt, 0.1, momentum, wd, nesterov);
    ref::sgd_step(p, g, buf, 0.1, momentum, wd, nesterov);
    REQUIRE_CLOSE(to_doubles(pt), p, rtol_of(dt));
    REQUIRE_CLOSE(to_doubles(bt), buf, rtol_of(dt));
  }
}

TEST_CASE("sgd_step by hand: momentum, Nesterov, weight decay", "[ops]") {
  CpuBackend be(1);
  Tensor p = make({1.0}, {1}, DType::F64), buf = Tensor::zeros({1}, DType::F64);
  const Tensor g = make({0.5}, {1}, DType::F64);
  sgd_step(be, p, g, buf, 0.1, 0.9, 0.1, false);  // g' = 0.6, buf = 0.6, p = 1 − 0.06
  REQUIRE(std::abs(p.data<double>()[0] - 0.94) < 1e-15);
  sgd_step(be, p, g, buf, 0.1, 0.9, 0.1, false);  // g' = 0.594, buf = 0.54 + 0.594 = 1.134
  REQUIRE(std::abs(buf.data<double>()[0] - 1.134) < 1e-15);
  REQUIRE(std::abs(p.data<double>()[0] - 0.8266) < 1e-15);
  Tensor q = make({1.0}, {1}, DType::F64), qb = Tensor::zeros({1}, DType::F64);
  sgd_step(be, q, g, qb, 0.1, 0.9, 0.1, true);  // v = g' + 0.9·buf = 0.6 + 0.54
  REQUIRE(std::abs(q.data<double>()[0] - 0.886) < 1e-15);
}

TEST_CASE("adamw_step matches the reference update with bias correction", "[ops]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  const int threads = GENERATE(1, 2);
  const double wd = GENERATE(0.0, 0.05);
  const std::size_t n = 40000;
  CpuBackend be(threads);
  Vec p = values(n, 161, dt), m(n, 0.0), v(n, 0.0);
  const std::int64_t len = std::int64_t(n);
  Tensor pt = make(p, {len}, dt), mt = Tensor::zeros({len}, dt), vt = Tensor::zeros({len}, dt);
  for (int step = 1; step <= 4; ++step) {
    const Vec g = values(n, 162 + step, dt, -1, 1);
    adamw_step(be, pt, make(g, {len}, dt), mt, vt, 1e-3, 0.9, 0.999, 1e-8, wd, step);
    ref::adamw_step(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, wd, step);
    INFO("step " << step);
    REQUIRE_CLOSE(to_doubles(pt), p, rtol_of(dt));
    REQUIRE_CLOSE(to_doubles(mt), m, rtol_of(dt));
    REQUIRE_CLOSE(to_doubles(vt), v, rtol_of(dt));
  }
}

TEST_CASE("adamw_step by hand: the first step moves by lr", "[ops]") {
  CpuBackend be(1);
  Tensor p = make({1.0}, {1}, DType::F64), m = Tensor::zeros({1}, DType::F64), v = Tensor::zeros({1}, DType::F64);
  adamw_step(be, p, make({0.5}, {1}, DType::F64), m, v, 0.1, 0.9, 0.999, 1e-8, 0.01, 1);
  // p·(1 − lr·wd) = 0.999; m̂ = 0.5, v̂ = 0.25: p −= 0.1·0.5 / (0.5 + 1e-8).
  REQUIRE(std::abs(m.data<double>()[0] - 0.05) < 1e-15);
  REQUIRE(std::abs(v.data<double>()[0] - 0.00025) < 1e-15);
  REQUIRE(std::abs(p.data<double>()[0] - (0.999 - 0.05 / (0.5 + 1e-8))) < 1e-14);
}

TEST_CASE("sum_squares accumulates in f64 and does not depend on the thread count", "[ops]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  const Layout layout = GENERATE(Layout::Contiguous, Layout::NarrowLast, Layout::StrideTwo);
  const Shape shape{3, 7, 101, 97};
  const Vec xv = values(numel(shape), 171, dt);
  const Tensor x = make(xv, shape, dt, layout);
  Tensor s1 = f64_out(1), s2 = f64_out(1);
  CpuBackend one(1), two(2);
  sum_squares(one, x, s1);
  sum_squares(two, x, s2);
  REQUIRE_CLOSE(to_doubles(s1), Vec{dot(xv, xv)}, 1e-12);
  REQUIRE(same_bits(s1, s2));
}

template <class Fn>
std::string error_of(Fn&& fn, bool& unsupported) {
  unsupported = false;
  try {
    fn();
  } catch (const Unsupported& e) {
    unsupported = true;
    return e.what();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("cpu ops refuse integer tensors and mixed dtypes", "[ops]") {
  CpuBackend be(1);
  bool unsupported = false;
  const Tensor a = Tensor::zeros({4}, DType::I32), b = Tensor::zeros({4}, DType::I32);
  Tensor y = Tensor::zeros({4}, DType::I32);
  std::string msg = error_of([&] { add(be, a, b, y); }, unsupported);
  INFO(msg);
  REQUIRE(unsupported);
  REQUIRE(msg.find("i32") != std::string::npos);
  Tensor s = f64_out(1);
  msg = error_of([&] { sum_squares(be, Tensor::zeros({3}, DType::I64), s); }, unsupported);
  REQUIRE(unsupported);

  // The op table's generic check (check_call) refuses an f64 y for f32 x, naming the op and dtype.
  const Tensor x = Tensor::zeros({2, 3}, DType::F32), c = Tensor::zeros({3}, DType::F32);
  Tensor y64 = Tensor::zeros({2, 3}, DType::F64);
  msg = error_of([&] { batchnorm_forward(be, x, c, c, c, c, y64); }, unsupported);
  REQUIRE(!unsupported);
  REQUIRE(msg.find("batchnorm_forward") != std::string::npos);
  REQUIRE(msg.find("f32") != std::string::npos);
}

}  // namespace
}  // namespace tessera::test::ops_test
