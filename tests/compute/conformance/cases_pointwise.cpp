// Conformance cases of the activations, the elementwise and per-channel ops, upsampling and the
// dtype-converting copy, against tests/support/reference/ops_ref.hpp. Bounds count the roundings
// of each formula (γ_k on the magnitudes of its terms); ReLU, upsampling and copy move values and
// must be exact. e^x and erf may be off by kFnUlps units of roundoff (relative for e^x, absolute
// for erf): backends approximate them differently (cpu's float erf: absolute error < 5e-7, about
// 8.4 units of 2^-24).
//
// bf16/f16: 16-bit inputs (generated in the dtype: exact; s and ds of the scales are f32 Master
// slots, or 16-bit in the master_in_call_dtype variant), f32 arithmetic (ctx.gamma: f32's γ, the
// float e^x and erf), so each bound below is f32's plus one rounding of each 16-bit output, added
// by Ctx::expect_within: b + u·(|y| + b) + η with u = 2^-8 (bf16), 2^-11 (f16). What is exact in
// f32 (ReLU, upsampling, copy: bound 0) stays exact, since its values are 16-bit values; a copy to
// a 16-bit dtype must give the value rounded once (rounded(): to nearest even, from f64 directly).
#include <cmath>
#include <utility>
#include <vector>

#include "compute/conformance/conformance.hpp"

namespace tessera::test::compute_conformance {
namespace {

using compute::Activation;
using compute::OpKind;

constexpr Activation kActivations[] = {Activation::Relu, Activation::Gelu, Activation::Sigmoid};
constexpr int kFnUlps = 16;

struct Dims {
  int N, C, H, W;
  int P() const { return H * W; }
  Shape shape() const { return {N, C, H, W}; }
};
Dims dims_of(const Variant& v) { return {v.n(), v.dim(7), v.dim(17), v.w(33)}; }

double act_ref(Activation a, double x) {
  return a == Activation::Relu   ? ref::relu(x)
         : a == Activation::Gelu ? ref::gelu(x)
                                 : ref::sigmoid(x);
}

void run_activation_forward(Ctx& ctx) {
  const Dims d = dims_of(ctx.variant);
  const Vec x = ctx.values(numel(d.shape()), 61, -6, 6);
  for (Activation a : kActivations) {
    Vec want(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) want[i] = act_ref(a, x[i]);
    const Tensor tx = ctx.input(x, d.shape());
    Tensor ty = ctx.output(d.shape());
    compute::activation_forward(ctx.backend, a, tx, ty);
    // ReLU exact; x·(1 + erf(x/√2))/2: erf's error halved plus 4 roundings, on |x|;
    // 1/(1 + e^−x): e^x's relative error plus 3 roundings, relative to y.
    Vec bound(x.size(), 0.0);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (a == Activation::Gelu) bound[i] = ctx.gamma(kFnUlps / 2 + 4) * std::abs(x[i]);
      if (a == Activation::Sigmoid) bound[i] = ctx.gamma(kFnUlps + 3) * want[i];
    }
    ctx.expect_within((std::string(compute::activation_name(a)) + " y").c_str(), ty, want, bound);
  }
}

void run_activation_backward(Ctx& ctx) {
  const Dims d = dims_of(ctx.variant);
  const Vec x = ctx.values(numel(d.shape()), 62, -6, 6), dy = ctx.values(numel(d.shape()), 63);
  for (Activation a : kActivations) {
    // What the forward pass saves: x for GELU, y (rounded to the dtype) for ReLU and sigmoid.
    Vec saved = x;
    if (a != Activation::Gelu) {
      for (double& e : saved) e = act_ref(a, e);
      saved = rounded(saved, ctx.dtype);
    }
    Vec want(x.size()), bound(x.size(), 0.0);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double s = saved[i];
      if (a == Activation::Relu) want[i] = s > 0 ? dy[i] : 0.0;  // exact
      if (a == Activation::Gelu) {
        // Φ(x) + x·φ(x): erf's error halved, e^(−x²/2)'s relative error plus x²/2·u from its
        // rounded argument, a few roundings; times dy.
        const double phi = std::exp(-0.5 * s * s) / std::sqrt(2 * 3.14159265358979323846);
        want[i] = dy[i] * ref::gelu_grad(s);
        bound[i] = ctx.gamma(kFnUlps + 8) * std::abs(dy[i]) * (1 + std::abs(s) * phi * (1 + s * s));
      }
      if (a == Activation::Sigmoid) {
        want[i] = dy[i] * s * (1 - s);
        bound[i] = ctx.gamma(3) * std::abs(dy[i]) * std::abs(s) * (1 + std::abs(s));
      }
    }
    const Tensor tdy = ctx.input(dy, d.shape()), ts = ctx.input(saved, d.shape());
    Tensor tdx = ctx.output(d.shape());
    compute::activation_backward(ctx.backend, a, tdy, ts, tdx);
    ctx.expect_within((std::string(compute::activation_name(a)) + " dx").c_str(), tdx, want, bound);
  }
}

void run_scale_channels(Ctx& ctx) {
  const Dims d = dims_of(ctx.variant);
  const Vec x = ctx.values(numel(d.shape()), 64);
  for (bool per_sample : {false, true}) {
    const Shape ss = per_sample ? Shape{d.N, d.C} : Shape{d.C};
    const Vec s = ctx.master_values(numel(ss), 65);
    const Vec want = ref::scale_channels(x, s, d.N, d.C, d.P());
    const Tensor tx = ctx.input(x, d.shape()), ts = ctx.master_input(s, ss);
    Tensor ty = ctx.output(d.shape());
    compute::scale_channels(ctx.backend, tx, ts, ty);
    ctx.expect_within(per_sample ? "y (per sample)" : "y (per channel)", ty, want,
                      scaled(abs_of(want), ctx.gamma(1)));
  }
}

void run_scale_channels_backward(Ctx& ctx) {
  const Dims d = dims_of(ctx.variant);
  const Vec x = ctx.values(numel(d.shape()), 66), dy = ctx.values(numel(d.shape()), 67);
  for (bool per_sample : {false, true}) {
    const Shape ss = per_sample ? Shape{d.N, d.C} : Shape{d.C};
    const Vec s = ctx.master_values(numel(ss), 68);
    const Vec want_dx = ref::scale_channels(dy, s, d.N, d.C, d.P());
    Vec want_ds = ref::scale_channels_ds(dy, x, numel(ss), d.N, d.C, d.P());
    const std::int64_t terms = (per_sample ? 1 : std::int64_t(d.N)) * d.P() + 1;  // +1: accumulated
    Vec bds = scaled(ref::scale_channels_ds(abs_of(dy), abs_of(x), numel(ss), d.N, d.C, d.P()),
                     ctx.gamma(terms));
    const Vec ds0 = ctx.variant.accumulate ? ctx.master_values(numel(ss), 69) : Vec{};
    for (std::size_t i = 0; i < ds0.size(); ++i)
      want_ds[i] += ds0[i], bds[i] += ctx.gamma(terms) * std::abs(ds0[i]);
    const Tensor tdy = ctx.input(dy, d.shape()), tx = ctx.input(x, d.shape()),
                 ts = ctx.master_input(s, ss);
    Tensor tdx = ctx.output(d.shape()), tds = ctx.master_output(ss, ds0);
    compute::scale_channels_backward(ctx.backend, tdy, tx, ts, &tdx, tds, ctx.variant.accumulate);
    ctx.expect_within("dx", tdx, want_dx, scaled(abs_of(want_dx), ctx.gamma(1)));
    ctx.expect_within(per_sample ? "ds (per sample)" : "ds (per channel)", tds, want_ds, bds);
  }
}

void run_channel_sum(Ctx& ctx) {
  const Dims d = dims_of(ctx.variant);
  const Vec x = ctx.values(numel(d.shape()), 70);
  const Tensor tx = ctx.input(x, d.shape());
  Tensor ty = ctx.output({d.N, d.C});
  compute::channel_sum(ctx.backend, tx, ty);
  ctx.expect_within("y", ty, ref::channel_sum(x, d.N, d.C, d.P()),
                    scaled(ref::channel_sum(abs_of(x), d.N, d.C, d.P()), ctx.gamma(d.P())));
}

void run_channel_broadcast(Ctx& ctx) {
  const Dims d = dims_of(ctx.variant);
  const double factor = 0.3;  // not a power of two: rounded to an f32 kernel's dtype
  const Vec g = ctx.values(std::size_t(d.N) * d.C, 71);
  Vec want = ref::channel_broadcast(g, factor, d.N, d.C, d.P()),
      bound = scaled(abs_of(want), ctx.gamma(3));
  const Vec y0 = ctx.variant.accumulate ? ctx.values(want.size(), 72) : Vec{};
  for (std::size_t i = 0; i < y0.size(); ++i)
    want[i] += y0[i], bound[i] += ctx.gamma(3) * std::abs(y0[i]);
  const Tensor tg = ctx.input(g, {d.N, d.C});
  Tensor ty = ctx.output(d.shape(), y0);
  compute::channel_broadcast(ctx.backend, tg, factor, ty, ctx.variant.accumulate);
  ctx.expect_within("y", ty, want, bound);
}

void run_add(Ctx& ctx) {
  const Dims d = dims_of(ctx.variant);
  const Vec a = ctx.values(numel(d.shape()), 73), b = ctx.values(numel(d.shape()), 74);
  Vec want(a.size()), bound(a.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    want[i] = a[i] + b[i], bound[i] = ctx.gamma(1) * (std::abs(a[i]) + std::abs(b[i]));
  const Tensor ta = ctx.input(a, d.shape()), tb = ctx.input(b, d.shape());
  Tensor ty = ctx.output(d.shape());
  compute::add(ctx.backend, ta, tb, ty);
  ctx.expect_within("y", ty, want, bound);
}

void run_axpy(Ctx& ctx) {
  const Dims d = dims_of(ctx.variant);
  const double alpha = -0.7;
  const Vec x = ctx.values(numel(d.shape()), 75), y0 = ctx.values(numel(d.shape()), 76);
  Vec want(x.size()), bound(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    want[i] = y0[i] + alpha * x[i],
    bound[i] = ctx.gamma(3) * (std::abs(y0[i]) + std::abs(alpha * x[i]));
  const Tensor tx = ctx.input(x, d.shape());
  Tensor ty = ctx.output(d.shape(), y0);
  compute::axpy(ctx.backend, alpha, tx, ty);
  ctx.expect_within("y", ty, want, bound);
}

void run_scale(Ctx& ctx) {
  const Dims d = dims_of(ctx.variant);
  const double alpha = 1.3;
  const Vec y0 = ctx.values(numel(d.shape()), 77);
  Vec want(y0.size());
  for (std::size_t i = 0; i < y0.size(); ++i) want[i] = alpha * y0[i];
  Tensor ty = ctx.output(d.shape(), y0);
  compute::scale(ctx.backend, alpha, ty);
  ctx.expect_within("y", ty, want, scaled(abs_of(want), ctx.gamma(2)));
}

void run_scale_samples(Ctx& ctx) {
  const Dims d = dims_of(ctx.variant);
  const Vec x = ctx.values(numel(d.shape()), 78), s = ctx.master_values(d.N, 79);
  Vec want(x.size());
  const std::size_t per = std::size_t(d.C) * d.P();
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = x[i] * s[i / per];
  const Tensor tx = ctx.input(x, d.shape()), ts = ctx.master_input(s, {d.N});
  Tensor ty = ctx.output(d.shape());
  compute::scale_samples(ctx.backend, tx, ts, ty);
  ctx.expect_within("y", ty, want, scaled(abs_of(want), ctx.gamma(1)));
}

void run_upsample(Ctx& ctx, bool backward) {
  const Dims d = dims_of(ctx.variant);
  const Vec x = ctx.values(numel(d.shape()), 80);
  for (int f : {2, 3}) {
    const Shape up{d.N, d.C, d.H * f, d.W * f};
    const std::string what = detail::cat(backward ? "dx" : "y", " (factor ", f, ")");
    if (!backward) {
      const Tensor tx = ctx.input(x, d.shape());
      Tensor ty = ctx.output(up);
      compute::upsample_nearest(ctx.backend, tx, f, ty);
      const Vec want = ref::upsample_nearest(x, d.N, d.C, d.H, d.W, f);
      ctx.expect_within(what.c_str(), ty, want, Vec(want.size(), 0.0));  // a copy: exact
    } else {
      const Vec dy = ctx.values(numel(up), 81);
      const Tensor tdy = ctx.input(dy, up);
      Tensor tdx = ctx.output(d.shape());
      compute::upsample_nearest_backward(ctx.backend, tdy, f, tdx);
      ctx.expect_within(what.c_str(), tdx,
                        ref::upsample_nearest_backward(dy, d.N, d.C, d.H, d.W, f),
                        scaled(ref::upsample_nearest_backward(abs_of(dy), d.N, d.C, d.H, d.W, f),
                               ctx.gamma(f * f)));
    }
  }
}

void run_copy(Ctx& ctx) {
  const Dims d = dims_of(ctx.variant);
  // The conversions of the call's dtype: f32 and f64 calls to f32 and f64; a bf16/f16 call (where a
  // backend without a 16-bit path may be unsupported) from it to every float dtype and from f32
  // and f64 to it. Rounding to nearest once: exact to f64 (and from 16 bits to f32), else as
  // rounded(), which the same dtype leaves unchanged (a copy).
  std::vector<std::pair<DType, DType>> pairs;  // (source, target)
  if (core::dtype_is_half(ctx.dtype)) {
    for (DType target : kDTypes) pairs.push_back({ctx.dtype, target});
    pairs.push_back({DType::F32, ctx.dtype});
    pairs.push_back({DType::F64, ctx.dtype});
  } else {
    pairs = {{ctx.dtype, DType::F32}, {ctx.dtype, DType::F64}};
  }
  for (const auto& [source, target] : pairs) {
    const Vec x = test::values(numel(d.shape()), 80, source, -3, 3);
    const Vec want = rounded(x, target);
    const Tensor tx = ctx.input(x, d.shape(), source);
    Tensor ty = ctx.output(d.shape(), target, ctx.variant.layout, {});
    compute::copy(ctx.backend, tx, ty);
    ctx.expect_within(detail::cat("y (", core::dtype_name(source), " to ", core::dtype_name(target), ")").c_str(),
                      ty, want, Vec(x.size(), 0.0));
  }
}

}  // namespace

std::vector<OpCase> pointwise_cases() {
  return {
      {OpKind::ActivationForward, {}, run_activation_forward},
      {OpKind::ActivationBackward, {}, run_activation_backward},
      {OpKind::ScaleChannels, {}, run_scale_channels},
      {OpKind::ScaleChannelsBackward, {.accumulate = true}, run_scale_channels_backward},
      {OpKind::ChannelSum, {}, run_channel_sum},
      {OpKind::ChannelBroadcast, {.accumulate = true}, run_channel_broadcast},
      {OpKind::Add, {}, run_add},
      {OpKind::Axpy, {}, run_axpy},
      {OpKind::ScaleSamples, {}, run_scale_samples},
      {OpKind::UpsampleNearest, {}, [](Ctx& c) { run_upsample(c, false); }},
      {OpKind::UpsampleNearestBackward, {}, [](Ctx& c) { run_upsample(c, true); }},
      {OpKind::Scale, {.strided = false}, run_scale},
      {OpKind::Copy, {}, run_copy},
  };
}

}  // namespace tessera::test::compute_conformance
