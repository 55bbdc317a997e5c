// Linear layer and softmax cross-entropy kernels vs the float64 reference and finite differences.
#include <string>

#include "ops_test_util.hpp"

namespace tessera::test::ops_test {
namespace {

using namespace tessera::compute;

TEST_CASE("linear forward and backward match the float64 reference", "[ops]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  const int threads = GENERATE(1, 2);
  const Layout layout = GENERATE(Layout::Contiguous, Layout::NarrowLast, Layout::StrideTwo);
  const std::vector<int> mkn = GENERATE(std::vector<int>{1100, 13, 7}, std::vector<int>{3, 5, 2},
                                        std::vector<int>{1, 1, 1});
  const bool with_bias = GENERATE(true, false);
  const int M = mkn[0], K = mkn[1], N = mkn[2];
  INFO(core::dtype_name(dt) << " M " << M << " K " << K << " N " << N << ", " << threads << " threads, "
                            << layout_name(layout) << (with_bias ? ", bias" : ""));
  CpuBackend be(threads);
  const Vec xv = values(std::size_t(M) * K, 101, dt), wv = values(std::size_t(N) * K, 102, dt),
            bv = values(N, 103, dt), dyv = values(std::size_t(M) * N, 104, dt);
  const Tensor x = make(xv, {M, K}, dt, layout), w = make(wv, {N, K}, dt, layout), b = make(bv, {N}, dt, layout);
  Tensor y = make_out({M, N}, dt, layout);
  linear_forward(be, x, w, with_bias ? &b : nullptr, y);
  REQUIRE_CLOSE(to_doubles(y), ref::linear_forward(xv, wv, with_bias ? bv : Vec{}, M, K, N), rtol_of(dt));

  const bool acc = GENERATE(false, true);
  const Vec dw0 = values(std::size_t(N) * K, 105, dt), db0 = values(N, 106, dt);
  Tensor dx = make_out({M, K}, dt, layout), dw = make(dw0, {N, K}, dt, layout), db = make(db0, {N}, dt, layout);
  linear_backward(be, make(dyv, {M, N}, dt, layout), x, w, &dx, dw, &db, acc);
  ref::LinearGrads g = ref::linear_backward(dyv, xv, wv, M, K, N);
  for (std::size_t i = 0; acc && i < g.dw.size(); ++i) g.dw[i] += dw0[i];
  for (std::size_t i = 0; acc && i < g.db.size(); ++i) g.db[i] += db0[i];
  REQUIRE_CLOSE(to_doubles(dx), g.dx, rtol_of(dt));
  REQUIRE_CLOSE(to_doubles(dw), g.dw, rtol_of(dt));
  REQUIRE_CLOSE(to_doubles(db), g.db, rtol_of(dt));

  // Without dx and db; and the same bits on the other thread count.
  CpuBackend other(3 - threads);
  Tensor y2 = make_out({M, N}, dt), dw2 = make(dw0, {N, K}, dt);
  linear_forward(other, x, w, with_bias ? &b : nullptr, y2);
  linear_backward(other, make(dyv, {M, N}, dt), x, w, nullptr, dw2, nullptr, acc);
  REQUIRE(same_bits(y2, y));
  REQUIRE(same_bits(dw2, dw));
}

TEST_CASE("linear gradients match central finite differences", "[ops]") {
  const int M = 4, K = 3, N = 2;
  CpuBackend be(1);
  const DType f64 = DType::F64;
  const Vec xv = values(M * K, 111, f64), wv = values(N * K, 112, f64), bv = values(N, 113, f64),
            r = values(M * N, 114, f64);
  auto loss = [&](const Vec& xs, const Vec& ws, const Vec& bs) {
    Tensor y = make_out({M, N}, f64);
    const Tensor b = make(bs, {N}, f64);
    linear_forward(be, make(xs, {M, K}, f64), make(ws, {N, K}, f64), &b, y);
    return dot(to_doubles(y), r);
  };
  Tensor dx = make_out({M, K}, f64), dw = make_out({N, K}, f64), db = make_out({N}, f64);
  linear_backward(be, make(r, {M, N}, f64), make(xv, {M, K}, f64), make(wv, {N, K}, f64), &dx, dw, &db);
  REQUIRE_CLOSE(to_doubles(dx), numeric_grad([&](const Vec& v) { return loss(v, wv, bv); }, xv), 1e-8);
  REQUIRE_CLOSE(to_doubles(dw), numeric_grad([&](const Vec& v) { return loss(xv, v, bv); }, wv), 1e-8);
  REQUIRE_CLOSE(to_doubles(db), numeric_grad([&](const Vec& v) { return loss(xv, wv, v); }, bv), 1e-8);
}

/// Labels in [-1, K): about one in eight ignored.
std::vector<std::int64_t> make_labels(std::size_t n, int k, std::uint64_t seed) {
  const Vec u = random_doubles(n, seed, 0, 1);
  std::vector<std::int64_t> l(n);
  for (std::size_t i = 0; i < n; ++i) l[i] = u[i] < 0.125 ? -1 : std::int64_t(u[i] * 8 * k) % k;
  return l;
}
/// An i64 tensor of `shape` holding `l`, as a window of a wider tensor when `view`.
Tensor label_tensor(const std::vector<std::int64_t>& l, const Shape& shape, bool view) {
  Shape big = shape;
  if (view) big.back() += 2;
  Tensor t = Tensor::zeros(big, DType::I64);
  if (view) t = t.narrow(int(shape.size()) - 1, 1, shape.back());
  const std::int64_t last = shape.back();
  std::int64_t row_stride = t.ndim() > 1 ? t.stride(-2) : 0;
  for (std::size_t i = 0; i < l.size(); ++i)
    t.data<std::int64_t>()[std::int64_t(i) / last * row_stride + std::int64_t(i) % last] = l[i];
  return t;
}

TEST_CASE("softmax cross-entropy matches the float64 reference", "[ops]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  const int threads = GENERATE(1, 2);
  const Layout layout = GENERATE(Layout::Contiguous, Layout::NarrowLast, Layout::StrideTwo);
  const Shape shape = GENERATE(Shape{2, 5, 23, 29}, Shape{6, 10}, Shape{1, 40, 3, 3});
  INFO(core::dtype_name(dt) << " " << core::shape_str(shape) << ", " << threads << " threads, "
                            << layout_name(layout));
  const int N = int(shape[0]), K = int(shape[1]), P = int(numel(shape) / std::size_t(N * K));
  Shape lshape{N};
  if (shape.size() == 4) lshape = {N, shape[2], shape[3]};
  CpuBackend be(threads);
  Vec lv = values(numel(shape), 121, dt, -8, 8);
  for (std::size_t i = 0; i < lv.size() / 2; ++i) lv[i] += 80;  // e^88 overflows a float: needs the max
  const std::vector<std::int64_t> labels = make_labels(numel(lshape), K, 122);
  const double scale = 1.0 / double(N * P);
  Tensor loss = f64_out(1), dl = make_out(shape, dt, layout);
  softmax_cross_entropy(be, make(lv, shape, dt, layout), label_tensor(labels, lshape, layout != Layout::Contiguous),
                        scale, loss, dl);
  const ref::SoftmaxCe want = ref::softmax_cross_entropy(lv, labels, N, K, P, scale);
  REQUIRE_CLOSE(to_doubles(loss), Vec{want.loss}, rtol_of(dt));
  REQUIRE_CLOSE(to_doubles(dl), want.dlogits, rtol_of(dt));

  CpuBackend other(3 - threads);
  Tensor loss2 = f64_out(1), dl2 = make_out(shape, dt);
  softmax_cross_entropy(other, make(lv, shape, dt), label_tensor(labels, lshape, false), scale, loss2, dl2);
  REQUIRE(same_bits(loss2, loss));
  REQUIRE(same_bits(dl2, dl));
}

TEST_CASE("softmax cross-entropy gradient matches central finite differences", "[ops]") {
  const Shape shape = GENERATE(Shape{3, 4}, Shape{2, 3, 2, 2});
  const int N = int(shape[0]), K = int(shape[1]);
  Shape lshape{N};
  if (shape.size() == 4) lshape = {N, shape[2], shape[3]};
  std::vector<std::int64_t> labels = make_labels(numel(lshape), K, 131);
  labels[1] = -1;  // at least one ignored position
  CpuBackend be(1);
  const Vec lv = values(numel(shape), 132, DType::F64, -3, 3);
  const double scale = 0.3;
  const Tensor lt = label_tensor(labels, lshape, false);
  auto f = [&](const Vec& v) {
    Tensor loss = f64_out(1), dl = make_out(shape, DType::F64);
    softmax_cross_entropy(be, make(v, shape, DType::F64), lt, scale, loss, dl);
    return scale * loss.data<double>()[0];
  };
  Tensor loss = f64_out(1), dl = make_out(shape, DType::F64);
  softmax_cross_entropy(be, make(lv, shape, DType::F64), lt, scale, loss, dl);
  REQUIRE_CLOSE(to_doubles(dl), numeric_grad(f, lv), 1e-7);
}

TEST_CASE("softmax cross-entropy refuses a label >= K before writing", "[ops]") {
  CpuBackend be(2);
  const Shape shape{2, 3, 4, 5};
  std::vector<std::int64_t> labels = make_labels(2 * 4 * 5, 3, 141);
  labels[(1 * 4 + 2) * 5 + 0] = 7;  // position [1,2,0]
  Tensor loss = f64_out(1), dl = make_out(shape, DType::F32);
  const Tensor before = dl.clone();
  std::string msg;
  try {
    softmax_cross_entropy(be, make(values(numel(shape), 142, DType::F32), shape, DType::F32),
                          label_tensor(labels, {2, 4, 5}, false), 1.0, loss, dl);
  } catch (const InvalidArgument& e) {
    msg = e.what();
  }
  INFO(msg);
  REQUIRE(msg.find("label 7") != std::string::npos);
  REQUIRE(msg.find("[1,2,0]") != std::string::npos);
  REQUIRE(same_bits(dl, before));
}

}  // namespace
}  // namespace tessera::test::ops_test
