// Layer norm and batch norm kernels vs the float64 reference, finite differences, views, in-place
// use, accumulation and determinism.
#include <cmath>

#include "ops_test_util.hpp"

namespace tessera::test::ops_test {
namespace {

using namespace tessera::compute;

Shape without_dim1(const Shape& s) {
  Shape r;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (i != 1) r.push_back(s[i]);
  return r;
}
int pixels_of(const Shape& s) { return static_cast<int>(numel(s) / std::size_t(s[0] * s[1])); }

struct LnOut {
  Tensor y, mean, rstd;
};
LnOut ln_forward(CpuBackend& be, const Tensor& x, const Tensor& g, const Tensor& b, Layout out = Layout::Contiguous) {
  LnOut o{make_out(x.shape(), x.dtype(), out), make_out(without_dim1(x.shape()), x.dtype(), out),
          make_out(without_dim1(x.shape()), x.dtype(), out)};
  layernorm_forward(be, x, g, b, 1e-5, o.y, o.mean, o.rstd);
  return o;
}

TEST_CASE("layernorm forward and backward match the float64 reference", "[ops]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  const int threads = GENERATE(1, 2);
  const Shape shape = GENERATE(Shape{2, 24, 37, 41}, Shape{5, 7}, Shape{3, 96, 4, 5}, Shape{1, 3, 1, 1});
  const Layout layout = GENERATE(Layout::Contiguous, Layout::NarrowLast, Layout::NarrowChannels, Layout::StrideTwo);
  INFO(core::dtype_name(dt) << " " << core::shape_str(shape) << ", " << threads << " threads, "
                            << layout_name(layout));
  const int N = int(shape[0]), C = int(shape[1]), P = pixels_of(shape);
  CpuBackend be(threads);
  const Vec xv = values(numel(shape), 1, dt, -2.0, 3.0), gv = values(C, 2, dt, 0.5, 1.5), bv = values(C, 3, dt),
            dyv = values(numel(shape), 4, dt);
  const Tensor x = make(xv, shape, dt, layout), g = make(gv, {C}, dt), b = make(bv, {C}, dt);
  const LnOut o = ln_forward(be, x, g, b, layout);
  const ref::LayerNormOut want = ref::layernorm_forward(xv, gv, bv, N, C, P, 1e-5);
  REQUIRE_CLOSE(to_doubles(o.y), want.y, rtol_of(dt));
  REQUIRE_CLOSE(to_doubles(o.mean), want.mean, rtol_of(dt));
  REQUIRE_CLOSE(to_doubles(o.rstd), want.rstd, rtol_of(dt));

  // Backward from the kernel's own (rounded) statistics, accumulating into prefilled dgamma/dbeta.
  const Tensor dy = make(dyv, shape, dt, layout);
  Tensor dx = make_out(shape, dt, layout);
  const Vec g0 = values(C, 5, dt), b0 = values(C, 6, dt);
  Tensor dg = make(g0, {C}, dt), db = make(b0, {C}, dt);
  const bool acc = GENERATE(false, true);
  layernorm_backward(be, dy, x, g, o.mean, o.rstd, dx, dg, db, acc);
  const ref::LayerNormGrads gw = ref::layernorm_backward(dyv, xv, gv, to_doubles(o.mean), to_doubles(o.rstd), N, C, P);
  Vec dg_want = gw.dgamma, db_want = gw.dbeta;
  for (int c = 0; acc && c < C; ++c) dg_want[c] += g0[c], db_want[c] += b0[c];
  REQUIRE_CLOSE(to_doubles(dx), gw.dx, rtol_of(dt));
  REQUIRE_CLOSE(to_doubles(dg), dg_want, rtol_of(dt));
  REQUIRE_CLOSE(to_doubles(db), db_want, rtol_of(dt));
}

TEST_CASE("layernorm gradients match central finite differences", "[ops]") {
  const Shape shape = GENERATE(Shape{2, 5, 3, 2}, Shape{3, 6});
  const int C = int(shape[1]);
  CpuBackend be(1);
  const Vec xv = values(numel(shape), 11, DType::F64), gv = values(C, 12, DType::F64, 0.5, 1.5),
            bv = values(C, 13, DType::F64), r = values(numel(shape), 14, DType::F64);
  auto loss = [&](const Vec& x, const Vec& g, const Vec& b) {
    const LnOut o = ln_forward(be, make(x, shape, DType::F64), make(g, {C}, DType::F64), make(b, {C}, DType::F64));
    return dot(to_doubles(o.y), r);
  };
  const Tensor x = make(xv, shape, DType::F64), g = make(gv, {C}, DType::F64);
  const LnOut o = ln_forward(be, x, g, make(bv, {C}, DType::F64));
  Tensor dx = make_out(shape, DType::F64), dg = make_out({C}, DType::F64), db = make_out({C}, DType::F64);
  layernorm_backward(be, make(r, shape, DType::F64), x, g, o.mean, o.rstd, dx, dg, db);
  REQUIRE_CLOSE(to_doubles(dx), numeric_grad([&](const Vec& v) { return loss(v, gv, bv); }, xv), 1e-7);
  REQUIRE_CLOSE(to_doubles(dg), numeric_grad([&](const Vec& v) { return loss(xv, v, bv); }, gv), 1e-7);
  REQUIRE_CLOSE(to_doubles(db), numeric_grad([&](const Vec& v) { return loss(xv, gv, v); }, bv), 1e-7);
}

TEST_CASE("layernorm runs in place and is deterministic", "[ops]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  const Shape shape{2, 16, 33, 35};
  const Vec xv = values(numel(shape), 21, dt), gv = values(16, 22, dt), bv = values(16, 23, dt);
  const Tensor g = make(gv, {16}, dt), b = make(bv, {16}, dt);
  CpuBackend one(1), two(2);
  const LnOut a = ln_forward(one, make(xv, shape, dt), g, b);
  const LnOut a2 = ln_forward(one, make(xv, shape, dt), g, b);
  const LnOut c = ln_forward(two, make(xv, shape, dt), g, b);
  REQUIRE(same_bits(a.y, a2.y));
  REQUIRE(same_bits(a.y, c.y));  // pixel blocks do not depend on the thread count
  Tensor x = make(xv, shape, dt);
  LnOut in{x, make_out(without_dim1(shape), dt), make_out(without_dim1(shape), dt)};
  layernorm_forward(two, x, g, b, 1e-5, x, in.mean, in.rstd);
  REQUIRE(same_bits(x, a.y));

  Tensor dx1 = make_out(shape, dt), dx2 = make_out(shape, dt), dg1 = make_out({16}, dt), dg2 = make_out({16}, dt),
         db1 = make_out({16}, dt), db2 = make_out({16}, dt);
  const Tensor dy = make(values(numel(shape), 24, dt), shape, dt), xt = make(xv, shape, dt);
  layernorm_backward(one, dy, xt, g, a.mean, a.rstd, dx1, dg1, db1);
  layernorm_backward(two, dy, xt, g, a.mean, a.rstd, dx2, dg2, db2);
  REQUIRE(same_bits(dx1, dx2));
  REQUIRE(same_bits(dg1, dg2));
  REQUIRE(same_bits(db1, db2));
  Tensor dyi = dy.clone();  // dx aliasing dy
  layernorm_backward(two, dyi, xt, g, a.mean, a.rstd, dyi, dg2, db2);
  REQUIRE(same_bits(dyi, dx1));
}

TEST_CASE("batchnorm kernels match the float64 reference", "[ops]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  const int threads = GENERATE(1, 2);
  const Shape shape = GENERATE(Shape{3, 10, 29, 31}, Shape{9, 5}, Shape{2, 3, 1, 7});
  const Layout layout = GENERATE(Layout::Contiguous, Layout::NarrowLast, Layout::StrideTwo);
  INFO(core::dtype_name(dt) << " " << core::shape_str(shape) << ", " << threads << " threads, "
                            << layout_name(layout));
  const int N = int(shape[0]), C = int(shape[1]), P = pixels_of(shape);
  CpuBackend be(threads);
  const Vec xv = values(numel(shape), 31, dt, -1, 2), dyv = values(numel(shape), 32, dt);
  const Vec mv = values(C, 33, dt), rv = values(C, 34, dt, 0.5, 2), gv = values(C, 35, dt), bv = values(C, 36, dt);
  const Tensor x = make(xv, shape, dt, layout), dy = make(dyv, shape, dt, layout);
  const Tensor m = make(mv, {C}, dt), r = make(rv, {C}, dt), g = make(gv, {C}, dt), b = make(bv, {C}, dt);

  Tensor sum = f64_out(C), sumsq = f64_out(C);
  channel_moments(be, x, sum, sumsq);
  const ref::Moments mom = ref::channel_moments(xv, N, C, P);
  REQUIRE_CLOSE(to_doubles(sum), mom.sum, 1e-12);  // f64 sums of exact values
  REQUIRE_CLOSE(to_doubles(sumsq), mom.sumsq, 1e-12);

  Tensor y = make_out(shape, dt, layout);
  batchnorm_forward(be, x, m, r, g, b, y);
  REQUIRE_CLOSE(to_doubles(y), ref::batchnorm_forward(xv, mv, rv, gv, bv, N, C, P), rtol_of(dt));

  Tensor sdy = f64_out(C), sdx = f64_out(C);
  batchnorm_backward_reduce(be, dy, x, m, r, sdy, sdx);
  const ref::Moments red = ref::batchnorm_backward_reduce(dyv, xv, mv, rv, N, C, P);
  REQUIRE_CLOSE(to_doubles(sdy), red.sum, 1e-12);
  REQUIRE_CLOSE(to_doubles(sdx), red.sumsq, 1e-12);

  Tensor dx = make_out(shape, dt, layout);
  const double count = double(N) * P * 2;  // as if another rank held as many samples
  batchnorm_backward_data(be, dy, x, m, r, g, sdy, sdx, count, dx);
  REQUIRE_CLOSE(to_doubles(dx), ref::batchnorm_backward_data(dyv, xv, mv, rv, gv, red.sum, red.sumsq, count, N, C, P),
                rtol_of(dt));

  CpuBackend other(3 - threads);  // the same bits on another thread count
  Tensor sum2 = f64_out(C), sumsq2 = f64_out(C), sdy2 = f64_out(C), sdx2 = f64_out(C);
  channel_moments(other, x, sum2, sumsq2);
  batchnorm_backward_reduce(other, dy, x, m, r, sdy2, sdx2);
  REQUIRE((same_bits(sum, sum2) && same_bits(sumsq, sumsq2) && same_bits(sdy, sdy2) && same_bits(sdx, sdx2)));
}

TEST_CASE("batchnorm reduce + data is the gradient of training-mode batch norm", "[ops]") {
  const Shape shape = GENERATE(Shape{3, 4, 2, 3}, Shape{6, 3});
  const int C = int(shape[1]);
  const double count = double(numel(shape)) / C, eps = 1e-5;
  CpuBackend be(2);
  const Vec xv = values(numel(shape), 41, DType::F64), gv = values(C, 42, DType::F64), bv = values(C, 43, DType::F64),
            r = values(numel(shape), 44, DType::F64);
  const Tensor g = make(gv, {C}, DType::F64), b = make(bv, {C}, DType::F64);
  // Statistics as the BatchNorm layer computes them: from channel_moments.
  auto stats = [&](const Tensor& x, Tensor& mean, Tensor& rstd) {
    Tensor s = f64_out(C), q = f64_out(C);
    channel_moments(be, x, s, q);
    for (int c = 0; c < C; ++c) {
      const double m = s.data<double>()[c] / count, var = q.data<double>()[c] / count - m * m;
      mean.data<double>()[c] = m;
      rstd.data<double>()[c] = 1.0 / std::sqrt(var + eps);
    }
  };
  auto loss = [&](const Vec& xs) {
    const Tensor x = make(xs, shape, DType::F64);
    Tensor mean = f64_out(C), rstd = f64_out(C), y = make_out(shape, DType::F64);
    stats(x, mean, rstd);
    batchnorm_forward(be, x, mean, rstd, g, b, y);
    return dot(to_doubles(y), r);
  };
  const Tensor x = make(xv, shape, DType::F64), dy = make(r, shape, DType::F64);
  Tensor mean = f64_out(C), rstd = f64_out(C), sdy = f64_out(C), sdx = f64_out(C), dx = make_out(shape, DType::F64);
  stats(x, mean, rstd);
  batchnorm_backward_reduce(be, dy, x, mean, rstd, sdy, sdx);
  batchnorm_backward_data(be, dy, x, mean, rstd, g, sdy, sdx, count, dx);
  REQUIRE_CLOSE(to_doubles(dx), numeric_grad(loss, xv), 1e-7);
}

}  // namespace
}  // namespace tessera::test::ops_test
