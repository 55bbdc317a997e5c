// Activations, elementwise kernels and the converting copy vs the float64 reference: forward,
// backward, finite differences, strided views and in-place use.
#include "ops_test_util.hpp"

namespace tessera::test::ops_test {
namespace {

using namespace tessera::compute;

double act_ref(Activation a, double x) {
  return a == Activation::Relu ? ref::relu(x) : a == Activation::Gelu ? ref::gelu(x) : ref::sigmoid(x);
}
/// dx of the reference from dy and what the kernel saves (x for gelu, y otherwise).
double act_grad_ref(Activation a, double dy, double saved) {
  switch (a) {
    case Activation::Relu: return saved > 0 ? dy : 0.0;
    case Activation::Gelu: return dy * ref::gelu_grad(saved);
    case Activation::Sigmoid: return dy * saved * (1 - saved);
  }
  return 0;
}

TEST_CASE("activations match the float64 reference", "[ops]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  const int threads = GENERATE(1, 2);
  const Activation act = GENERATE(Activation::Relu, Activation::Gelu, Activation::Sigmoid);
  const Layout layout = GENERATE(Layout::Contiguous, Layout::NarrowLast, Layout::StrideTwo);
  const Shape shape = GENERATE(Shape{2, 7, 45, 53}, Shape{3, 11});
  INFO(core::dtype_name(dt) << " " << activation_name(act) << " " << core::shape_str(shape) << ", " << threads
                            << " threads, " << layout_name(layout));
  CpuBackend be(threads);
  const Vec xv = values(numel(shape), 51, dt, -6, 6), dyv = values(numel(shape), 52, dt);
  const Tensor x = make(xv, shape, dt, layout);
  Tensor y = make_out(shape, dt, layout);
  activation_forward(be, act, x, y);
  Vec want(xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) want[i] = act_ref(act, xv[i]);
  REQUIRE_CLOSE(to_doubles(y), want, rtol_of(dt));

  const Tensor& saved = act == Activation::Gelu ? x : y;
  const Vec sv = to_doubles(saved);
  Tensor dx = make_out(shape, dt, layout);
  activation_backward(be, act, make(dyv, shape, dt, layout), saved, dx);
  Vec gwant(xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) gwant[i] = act_grad_ref(act, dyv[i], sv[i]);
  REQUIRE_CLOSE(to_doubles(dx), gwant, rtol_of(dt));

  // In place: y = f(y) and dx = dy·f' into dy give the same bits.
  Tensor xi = make(xv, shape, dt, layout);
  activation_forward(be, act, xi, xi);
  REQUIRE(same_bits(xi, y));
  Tensor dyi = make(dyv, shape, dt, layout);
  activation_backward(be, act, dyi, act == Activation::Gelu ? x : y, dyi);
  REQUIRE(same_bits(dyi, dx));
}

TEST_CASE("activation gradients match central finite differences", "[ops]") {
  const Activation act = GENERATE(Activation::Relu, Activation::Gelu, Activation::Sigmoid);
  const Shape shape{2, 3, 5, 7};
  CpuBackend be(1);
  Vec xv = values(numel(shape), 61, DType::F64, -5, 5);
  for (auto& v : xv) v += v >= 0 ? 0.01 : -0.01;  // keep away from ReLU's kink
  const Vec r = values(numel(shape), 62, DType::F64);
  const double h = 1e-6;
  auto f = [&](double shift) {
    Vec s = xv;
    for (auto& v : s) v += shift;
    Tensor y = make_out(shape, DType::F64);
    activation_forward(be, act, make(s, shape, DType::F64), y);
    return to_doubles(y);
  };
  const Vec yp = f(h), ym = f(-h);
  Vec fd(xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) fd[i] = r[i] * (yp[i] - ym[i]) / (2 * h);
  const Tensor x = make(xv, shape, DType::F64);
  Tensor y = make_out(shape, DType::F64), dx = make_out(shape, DType::F64);
  activation_forward(be, act, x, y);
  activation_backward(be, act, make(r, shape, DType::F64), act == Activation::Gelu ? x : y, dx);
  REQUIRE_CLOSE(to_doubles(dx), fd, 1e-7);
}

TEST_CASE("add, axpy, scale and scale_samples match the float64 reference", "[ops]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  const int threads = GENERATE(1, 2);
  const Layout layout = GENERATE(Layout::Contiguous, Layout::NarrowLast, Layout::NarrowChannels, Layout::StrideTwo);
  const Shape shape = GENERATE(Shape{3, 5, 67, 41}, Shape{4, 6}, Shape{7});
  INFO(core::dtype_name(dt) << " " << core::shape_str(shape) << ", " << threads << " threads, "
                            << layout_name(layout));
  CpuBackend be(threads);
  const std::size_t n = numel(shape);
  const Vec av = values(n, 71, dt), bv = values(n, 72, dt), sv = values(std::size_t(shape[0]), 73, dt);
  const Tensor a = make(av, shape, dt, layout), b = make(bv, shape, dt, layout);

  Tensor y = make_out(shape, dt, layout);
  add(be, a, b, y);
  Vec want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = av[i] + bv[i];
  REQUIRE_CLOSE(to_doubles(y), want, rtol_of(dt));
  Tensor ai = make(av, shape, dt, layout);
  add(be, ai, b, ai);  // in place
  REQUIRE(same_bits(ai, y));

  Tensor yy = make(bv, shape, dt, layout);
  axpy(be, -0.75, a, yy);
  for (std::size_t i = 0; i < n; ++i) want[i] = bv[i] - 0.75 * av[i];
  REQUIRE_CLOSE(to_doubles(yy), want, rtol_of(dt));

  Tensor z = make(av, shape, dt);  // scale needs a contiguous y
  scale(be, 1.5, z);
  for (std::size_t i = 0; i < n; ++i) want[i] = 1.5 * av[i];
  REQUIRE_CLOSE(to_doubles(z), want, rtol_of(dt));

  Tensor ys = make_out(shape, dt, layout);
  scale_samples(be, a, make(sv, {shape[0]}, dt), ys);
  const std::size_t per = n / std::size_t(shape[0]);
  for (std::size_t i = 0; i < n; ++i) want[i] = av[i] * sv[i / per];
  REQUIRE_CLOSE(to_doubles(ys), want, rtol_of(dt));
}

TEST_CASE("scale_channels and its backward match the reference and finite differences", "[ops]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  const int threads = GENERATE(1, 2);
  const bool per_sample = GENERATE(false, true);
  const Layout layout = GENERATE(Layout::Contiguous, Layout::NarrowLast, Layout::StrideTwo);
  const Shape shape = GENERATE(Shape{2, 9, 43, 47}, Shape{5, 4});
  INFO(core::dtype_name(dt) << " " << core::shape_str(shape) << (per_sample ? " per sample" : " per channel")
                            << ", " << threads << " threads, " << layout_name(layout));
  const int N = int(shape[0]), C = int(shape[1]), P = int(numel(shape) / std::size_t(N * C));
  const Shape sshape = per_sample ? Shape{N, C} : Shape{C};
  CpuBackend be(threads);
  const Vec xv = values(numel(shape), 81, dt), sv = values(numel(sshape), 82, dt), dyv = values(numel(shape), 83, dt);
  const Tensor x = make(xv, shape, dt, layout), s = make(sv, sshape, dt, layout), dy = make(dyv, shape, dt, layout);
  Tensor y = make_out(shape, dt, layout);
  scale_channels(be, x, s, y);
  REQUIRE_CLOSE(to_doubles(y), ref::scale_channels(xv, sv, N, C, P), rtol_of(dt));
  Tensor xi = make(xv, shape, dt, layout);
  scale_channels(be, xi, s, xi);
  REQUIRE(same_bits(xi, y));

  const bool acc = GENERATE(false, true);
  const Vec ds0 = values(sv.size(), 84, dt);
  Tensor dx = make_out(shape, dt, layout), ds = make(ds0, sshape, dt, layout);
  scale_channels_backward(be, dy, x, s, &dx, ds, acc);
  Vec ds_want = ref::scale_channels_ds(dyv, xv, sv.size(), N, C, P);
  for (std::size_t i = 0; acc && i < ds_want.size(); ++i) ds_want[i] += ds0[i];
  REQUIRE_CLOSE(to_doubles(dx), ref::scale_channels(dyv, sv, N, C, P), rtol_of(dt));
  REQUIRE_CLOSE(to_doubles(ds), ds_want, rtol_of(dt));
  Tensor ds2 = make(ds0, sshape, dt);
  scale_channels_backward(be, dy, x, s, nullptr, ds2, acc);  // without dx
  REQUIRE(same_bits(ds2, ds));

  if (dt == DType::F64 && numel(shape) < 100) {  // ⟨y, dy⟩ is bilinear: differences are exact
    auto loss = [&](const Vec& xs, const Vec& ss) {
      Tensor out = make_out(shape, dt);
      scale_channels(be, make(xs, shape, dt), make(ss, sshape, dt), out);
      return dot(to_doubles(out), dyv);
    };
    Tensor dx1 = make_out(shape, dt), ds1 = make_out(sshape, dt);
    scale_channels_backward(be, dy, x, s, &dx1, ds1);
    REQUIRE_CLOSE(to_doubles(dx1), numeric_grad([&](const Vec& v) { return loss(v, sv); }, xv), 1e-8);
    REQUIRE_CLOSE(to_doubles(ds1), numeric_grad([&](const Vec& v) { return loss(xv, v); }, sv), 1e-8);
  }
}

TEST_CASE("channel_sum, channel_broadcast and upsampling match the reference and are adjoint", "[ops]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  const int threads = GENERATE(1, 2);
  const Layout layout = GENERATE(Layout::Contiguous, Layout::NarrowLast, Layout::NarrowChannels, Layout::StrideTwo);
  const int N = 2, C = 5, H = 37, W = 29;
  INFO(core::dtype_name(dt) << ", " << threads << " threads, " << layout_name(layout));
  CpuBackend be(threads);
  const Shape shape{N, C, H, W};
  const Vec xv = values(numel(shape), 91, dt), gv = values(N * C, 92, dt), y0 = values(numel(shape), 93, dt);
  const Tensor x = make(xv, shape, dt, layout), g = make(gv, {N, C}, dt, layout);

  Tensor s = make_out({N, C}, dt, layout);
  channel_sum(be, x, s);
  REQUIRE_CLOSE(to_doubles(s), ref::channel_sum(xv, N, C, H * W), rtol_of(dt));
  const bool acc = GENERATE(false, true);
  Tensor yb = make(y0, shape, dt, layout);
  channel_broadcast(be, g, 0.25, yb, acc);
  Vec want = ref::channel_broadcast(gv, 0.25, N, C, H * W);
  for (std::size_t i = 0; acc && i < want.size(); ++i) want[i] += y0[i];
  REQUIRE_CLOSE(to_doubles(yb), want, rtol_of(dt));
  // ⟨channel_sum(x), g⟩ = ⟨x, channel_broadcast(g, 1)⟩.
  Tensor b1 = make_out(shape, dt);
  channel_broadcast(be, g, 1.0, b1);
  REQUIRE(std::abs(dot(to_doubles(s), gv) - dot(xv, to_doubles(b1))) <= rtol_of(dt) * 100);

  const int f = GENERATE(1, 2, 3);
  const Shape up{N, C, H * f, W * f};
  Tensor yu = make_out(up, dt, layout);
  upsample_nearest(be, x, f, yu);
  REQUIRE_CLOSE(to_doubles(yu), ref::upsample_nearest(xv, N, C, H, W, f), rtol_of(dt));
  const Vec dyv = values(numel(up), 94, dt);
  Tensor dxu = make_out(shape, dt, layout);
  upsample_nearest_backward(be, make(dyv, up, dt, layout), f, dxu);
  const Vec dxw = ref::upsample_nearest_backward(dyv, N, C, H, W, f);
  REQUIRE_CLOSE(to_doubles(dxu), dxw, rtol_of(dt));
  // ⟨up(x), dy⟩ = ⟨x, up_backward(dy)⟩.
  REQUIRE(std::abs(dot(to_doubles(yu), dyv) - dot(xv, to_doubles(dxu))) <= rtol_of(dt) * 100);
}

TEST_CASE("copy converts f32 and f64 on any strides exactly as the float64 reference rounds", "[ops]") {
  const DType from = GENERATE(DType::F32, DType::F64);
  const DType to = GENERATE(DType::F32, DType::F64);
  const int threads = GENERATE(1, 3);
  const Layout in_layout = GENERATE(Layout::Contiguous, Layout::NarrowLast, Layout::StrideTwo);
  const Layout out_layout = GENERATE(Layout::Contiguous, Layout::NarrowChannels, Layout::StrideTwo);
  const Shape shape = GENERATE(Shape{3, 5, 67, 41}, Shape{4, 6}, Shape{7}, Shape{2, 0, 3});
  INFO(core::dtype_name(from) << " -> " << core::dtype_name(to) << " " << core::shape_str(shape) << ", "
                              << threads << " threads, " << layout_name(in_layout) << " into "
                              << layout_name(out_layout));
  CpuBackend be(threads);
  const std::size_t n = numel(shape);
  // Values with more digits than f32 holds, so that f64 -> f32 must round.
  const Vec xv = values(n, 81, from, -1e3, 1e3);
  const Tensor x = make(xv, shape, from, in_layout);
  Tensor y = make_out(shape, to, out_layout);
  copy(be, x, y);
  Vec want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = to == DType::F32 ? double(static_cast<float>(xv[i])) : xv[i];
  REQUIRE(to_doubles(y) == want);
}

TEST_CASE("copy refuses targets that are not float; the cpu backend converts to bf16", "[ops]") {
  CpuBackend be(1);
  Tensor x = Tensor::zeros({4});
  x.fill(1.0 + 0x1p-7);  // exact in bf16 (0x3f81)
  Tensor labels = Tensor::zeros({4}, DType::I64), half = Tensor::zeros({4}, DType::BF16);
  Tensor wrong_shape = Tensor::zeros({5});
  REQUIRE_THROWS_AS(copy(be, x, labels), InvalidArgument);
  REQUIRE_THROWS_AS(copy(be, x, wrong_shape), InvalidArgument);
  copy(be, x, half);  // every pair of float dtypes: the conformance suite's copy case
  REQUIRE(half.data<std::uint16_t>()[3] == 0x3f81);
}

}  // namespace
}  // namespace tessera::test::ops_test
