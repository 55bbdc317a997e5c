// Conformance cases of softmax cross-entropy, the optimizer steps and sum_squares, against
// tests/support/reference/ops_ref.hpp. SGD and sum_squares get γ_k on the magnitudes of their
// terms; softmax cross-entropy and AdamW (e^x, log, sqrt, pow) the op tests' tensor-scaled rtol_of.
// The optimizers take contiguous tensors only (their contract), so they run no strided variants.
//
// bf16/f16: the logits, dlogits, params, gradients and optimizer state of these calls are all
// 16-bit Float slots (the trainer keeps its optimizer in f32; the 16-bit optimizer calls are
// checked all the same). Inputs are exact (generated in 16 bits), the arithmetic f32: SGD's and
// sum_squares' γ_k are f32's, softmax and AdamW f32's rtol; each 16-bit output adds its one
// rounding, element-wise b + u·(|y| + b) + η or tensor-scaled u·max|y| (u = 2^-8 bf16, 2^-11 f16);
// the f64 loss and sum keep f32's bound alone.
#include <cmath>

#include "compute/conformance/conformance.hpp"

namespace tessera::test::compute_conformance {
namespace {

using compute::OpKind;

/// Labels in [0, K) with every fifth ignored (−1).
std::vector<std::int64_t> labels_of(std::size_t n, int K, std::uint64_t seed) {
  const Vec r = random_doubles(n, seed, 0, K);
  std::vector<std::int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = i % 5 == 3 ? -1 : std::min<std::int64_t>(K - 1, std::int64_t(r[i]));
  return out;
}

void run_softmax_cross_entropy(Ctx& ctx) {
  const Variant& v = ctx.variant;
  const int N = v.n(), K = v.dim(7), H = v.dim(17), W = v.w(33);
  for (bool image : {false, true}) {
    const int P = image ? H * W : 1;
    const Shape ls = image ? Shape{N, K, H, W} : Shape{N, K},
                lab = image ? Shape{N, H, W} : Shape{N};
    const Vec logits = ctx.values(numel(ls), 91, -4, 4);
    const std::vector<std::int64_t> labels = labels_of(numel(lab), K, 92);
    const double scale = 0.125;
    const ref::SoftmaxCe want = ref::softmax_cross_entropy(logits, labels, N, K, P, scale);
    const Tensor tl = ctx.input(logits, ls), tlab = ctx.input_i64(labels, lab);
    Tensor loss = ctx.output_f64({1}), dl = ctx.output(ls);
    compute::softmax_cross_entropy(ctx.backend, tl, tlab, scale, loss, dl);
    ctx.expect_close(image ? "loss (N,K,H,W)" : "loss (N,K)", loss, {want.loss},
                     ctx.rtol());
    ctx.expect_close(image ? "dlogits (N,K,H,W)" : "dlogits (N,K)", dl, want.dlogits,
                     ctx.rtol());
  }
}

Shape flat_shape(const Variant& v) { return {v.n(), v.dim(7), v.w(33)}; }

void run_sgd_step(Ctx& ctx) {
  const Shape s = flat_shape(ctx.variant);
  const double lr = 0.1, momentum = 0.9, wd = 0.01;
  const Vec p0 = ctx.values(numel(s), 93), g = ctx.values(numel(s), 94),
            b0 = ctx.values(numel(s), 95);
  for (bool nesterov : {false, true}) {
    Vec p = p0, buf = b0;
    ref::sgd_step(p, g, buf, lr, momentum, wd, nesterov);
    // g' = g + wd·p, buf' = m·buf + g', v = buf' or g' + m·buf', p' = p − lr·v: each a few
    // roundings (lr, momentum and wd rounded to the dtype too) on these magnitudes.
    Vec bp(p.size()), bb(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double gm = std::abs(g[i]) + wd * std::abs(p0[i]), bm = momentum * std::abs(b0[i]) + gm;
      const double vm = nesterov ? gm + momentum * bm : bm;
      bb[i] = ctx.gamma(5) * bm;
      bp[i] = ctx.gamma(10) * (std::abs(p0[i]) + lr * vm);
    }
    Tensor tp = ctx.output(s, p0), tb = ctx.output(s, b0);
    const Tensor tg = ctx.input(g, s);
    compute::sgd_step(ctx.backend, tp, tg, tb, lr, momentum, wd, nesterov);
    ctx.expect_within(nesterov ? "param (nesterov)" : "param", tp, p, bp);
    ctx.expect_within(nesterov ? "momentum buffer (nesterov)" : "momentum buffer", tb, buf, bb);
  }
}

void run_adamw_step(Ctx& ctx) {
  const Shape s = flat_shape(ctx.variant);
  const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  const std::int64_t step = 3;
  const Vec p0 = ctx.values(numel(s), 96), g = ctx.values(numel(s), 97),
            m0 = ctx.values(numel(s), 98), v0 = ctx.values(numel(s), 99, 0.0, 0.5);
  Vec p = p0, m = m0, v = v0;
  ref::adamw_step(p, g, m, v, lr, b1, b2, eps, wd, step);
  Tensor tp = ctx.output(s, p0), tm = ctx.output(s, m0), tv = ctx.output(s, v0);
  const Tensor tg = ctx.input(g, s);
  compute::adamw_step(ctx.backend, tp, tg, tm, tv, lr, b1, b2, eps, wd, step);
  ctx.expect_close("param", tp, p, ctx.rtol());
  ctx.expect_close("m", tm, m, ctx.rtol());
  ctx.expect_close("v", tv, v, ctx.rtol());
}

void run_sum_squares(Ctx& ctx) {
  const Shape s = flat_shape(ctx.variant);
  const Vec x = ctx.values(numel(s), 100);
  double want = 0;
  for (double e : x) want += e * e;
  const Tensor tx = ctx.input(x, s);
  Tensor out = ctx.output_f64({1});
  compute::sum_squares(ctx.backend, tx, out);
  ctx.expect_within("sum", out, {want}, {ctx.gamma(std::int64_t(x.size()) + 1) * want});
}

}  // namespace

std::vector<OpCase> loss_optim_cases() {
  return {
      {OpKind::SoftmaxCrossEntropy, {}, run_softmax_cross_entropy},
      {OpKind::SgdStep, {.strided = false}, run_sgd_step},
      {OpKind::AdamWStep, {.strided = false}, run_adamw_step},
      {OpKind::SumSquares, {}, run_sum_squares},
  };
}

}  // namespace tessera::test::compute_conformance
