// Conformance cases of linear, layer norm and batch norm, against
// tests/support/reference/ops_ref.hpp. Sums get Higham's element-wise bound γ_m·Σ|terms| (m terms,
// +1 for an accumulated one), other formulas γ_k on the magnitudes of their terms; layer norm's
// forward (a variance, a square root and a division) gets the op tests' tensor-scaled rtol_of.
//
// bf16/f16: x, dy, y, dx in 16 bits (generated in it: exact), the Master slots (w, bias, dw, db;
// gamma, beta, mean, rstd, dgamma, dbeta) in f32 — or in 16 bits in the master_in_call_dtype
// variant. The arithmetic is f32, so every bound below is f32's (ctx.gamma, ctx.rtol()), plus one
// rounding of each 16-bit output (Ctx::expect_within / expect_close: b + u·(|y| + b) + η, u =
// 2^-8 bf16, 2^-11 f16): linear y, dx γ_K·Σ|x||w| + u|y|; layer norm y within f32's rtol + u
// (tensor-scaled), mean and rstd f32's rtol (or + u in 16 bits); batch norm y γ_5 on its terms +
// u|y|, dx γ_8 + u|dx|; the f64 reductions (channel moments, backward-reduce) f32's bound alone.
// A backend that declares compute::Capabilities::rounds_master_to_call_dtype (the cuda backend)
// rounds linear's f32 w and bias to the call's dtype first: y and dx get γ(1 + u) + u for γ, u =
// Ctx::master_rounding() (cases_conv.cpp derives it: u·Σ|x||w| + u·|b| more); its f32 dw and db
// are computed in f32 (cuBLAS writes an f32 C from 16-bit A and B), so they keep f32's bound.
#include <cmath>

#include "compute/conformance/conformance.hpp"

namespace tessera::test::compute_conformance {
namespace {

using compute::OpKind;

/// ref += init, bound += γ·|init| when the variant accumulates.
void add_init(const Ctx& ctx, Vec& ref, Vec& bound, const Vec& init, double gamma) {
  if (!ctx.variant.accumulate) return;
  for (std::size_t i = 0; i < ref.size(); ++i)
    ref[i] += init[i], bound[i] += gamma * std::abs(init[i]);
}
/// The values a Master output (a parameter gradient) accumulates into.
Vec init_of(Ctx& ctx, std::size_t n, std::uint64_t seed) {
  return ctx.variant.accumulate ? ctx.master_values(n, seed) : Vec{};
}

// ---- linear: x (M,K), w (N,K), b (N)
// -------------------------------------------------------------
struct LinearDims {
  int M, K, N;
};
// 257 rows: more than one block of the cpu's 256-row GEMM tiles.
LinearDims linear_dims(const Variant& v) { return {v.batch(257), v.w(33), v.dim(17)}; }

void run_linear_forward(Ctx& ctx) {
  const auto [M, K, N] = linear_dims(ctx.variant);
  const Vec x = ctx.values(std::size_t(M) * K, 21), w = ctx.master_values(std::size_t(N) * K, 22),
            b = ctx.master_values(N, 23);
  const Vec want = ref::linear_forward(x, w, b, M, K, N);
  // A declared rounding of w and bias: γ(1 + u) + u (cases_conv.cpp).
  const double uw = ctx.master_rounding();
  const Vec bound = scaled(ref::linear_forward(abs_of(x), abs_of(w), abs_of(b), M, K, N),
                           ctx.gamma(K + 1) * (1 + uw) + uw);
  const Tensor tx = ctx.input(x, {M, K}), tw = ctx.master_input(w, {N, K}), tb = ctx.master_input(b, {N});
  Tensor ty = ctx.output({M, N});
  compute::linear_forward(ctx.backend, tx, tw, &tb, ty);
  ctx.expect_within("y", ty, want, bound);
}

void run_linear_backward(Ctx& ctx) {
  const auto [M, K, N] = linear_dims(ctx.variant);
  const Vec dy = ctx.values(std::size_t(M) * N, 24), x = ctx.values(std::size_t(M) * K, 25),
            w = ctx.master_values(std::size_t(N) * K, 26);
  ref::LinearGrads want = ref::linear_backward(dy, x, w, M, K, N);
  const ref::LinearGrads mag = ref::linear_backward(abs_of(dy), abs_of(x), abs_of(w), M, K, N);
  // dx reads w (a declared rounding of it: γ(1 + u) + u); dw and db do not, and are never rounded.
  const double uw = ctx.master_rounding();
  Vec bdx = scaled(mag.dx, ctx.gamma(N) * (1 + uw) + uw), bdw = scaled(mag.dw, ctx.gamma(M + 1)),
      bdb = scaled(mag.db, ctx.gamma(M + 1));
  const Vec dw0 = init_of(ctx, want.dw.size(), 27), db0 = init_of(ctx, want.db.size(), 28);
  add_init(ctx, want.dw, bdw, dw0, ctx.gamma(M + 1));
  add_init(ctx, want.db, bdb, db0, ctx.gamma(M + 1));
  const Tensor tdy = ctx.input(dy, {M, N}), tx = ctx.input(x, {M, K}), tw = ctx.master_input(w, {N, K});
  Tensor tdx = ctx.output({M, K}), tdw = ctx.master_output({N, K}, dw0), tdb = ctx.master_output({N}, db0);
  compute::linear_backward(ctx.backend, tdy, tx, tw, &tdx, tdw, &tdb, ctx.variant.accumulate);
  ctx.expect_within("dx", tdx, want.dx, bdx);
  ctx.expect_within("dw", tdw, want.dw, bdw);
  ctx.expect_within("db", tdb, want.db, bdb);
}

// ---- images (N, C, H, W) normalised over C (layer norm) or over N, H, W (batch norm)
// ---------------
struct ImageDims {
  int N, C, H, W;
  int P() const { return H * W; }
  Shape shape() const { return {N, C, H, W}; }
  Shape stats() const { return {N, H, W}; }  // x's shape without dim 1
};
ImageDims image_dims(const Variant& v) { return {v.n(), v.dim(7), v.dim(17), v.w(33)}; }

void run_layernorm_forward(Ctx& ctx) {
  const ImageDims d = image_dims(ctx.variant);
  const Vec x = ctx.values(numel(d.shape()), 31, -2, 3), g = ctx.master_values(d.C, 32, 0.5, 1.5),
            b = ctx.master_values(d.C, 33);
  const ref::LayerNormOut want = ref::layernorm_forward(x, g, b, d.N, d.C, d.P(), 1e-5);
  const Tensor tx = ctx.input(x, d.shape()), tg = ctx.master_input(g, {d.C}), tb = ctx.master_input(b, {d.C});
  Tensor ty = ctx.output(d.shape()), tm = ctx.master_output(d.stats()), tr = ctx.master_output(d.stats());
  compute::layernorm_forward(ctx.backend, tx, tg, tb, 1e-5, ty, tm, tr);
  ctx.expect_close("y", ty, want.y, ctx.rtol());
  ctx.expect_close("mean", tm, want.mean, ctx.rtol());
  ctx.expect_close("rstd", tr, want.rstd, ctx.rtol());
}

void run_layernorm_backward(Ctx& ctx) {
  const ImageDims d = image_dims(ctx.variant);
  const Vec x = ctx.values(numel(d.shape()), 34, -2, 3), g = ctx.master_values(d.C, 35, 0.5, 1.5),
            dy = ctx.values(numel(d.shape()), 36);
  // The statistics as the forward pass would hand them over: rounded to the dtype.
  const ref::LayerNormOut fwd = ref::layernorm_forward(x, g, Vec(d.C, 0.0), d.N, d.C, d.P(), 1e-5);
  Vec m = fwd.mean, r = fwd.rstd;
  m = rounded(m, ctx.master()), r = rounded(r, ctx.master());
  ref::LayerNormGrads want = ref::layernorm_backward(dy, x, g, m, r, d.N, d.C, d.P());
  // dgamma = Σ dy·(x − mean)·rstd and dbeta = Σ dy over N·P terms (3 roundings in each product).
  Vec bdg(d.C, 0.0), bdb(d.C, 0.0);
  for (int n = 0; n < d.N; ++n)
    for (int c = 0; c < d.C; ++c)
      for (int p = 0; p < d.P(); ++p) {
        const std::size_t i = ref::at(n, c, p, d.C, d.P()), s = std::size_t(n) * d.P() + p;
        bdg[c] += std::abs(dy[i]) * (std::abs(x[i]) + std::abs(m[s])) * r[s];
        bdb[c] += std::abs(dy[i]);
      }
  const std::int64_t terms = std::int64_t(d.N) * d.P();
  bdg = scaled(bdg, ctx.gamma(terms + 4));
  bdb = scaled(bdb, ctx.gamma(terms + 1));
  // dx = rstd·(g − Σg/C − x̂·Σ(g·x̂)/C) with g = γ·dy: C-term sums, x̂ as above, a few roundings;
  // element-wise, since it cancels to 0 where C = 1.
  Vec bdx(x.size());
  for (int n = 0; n < d.N; ++n)
    for (int p = 0; p < d.P(); ++p) {
      const std::size_t s = std::size_t(n) * d.P() + p;
      double sg = 0, sgx = 0;
      for (int c = 0; c < d.C; ++c) {
        const std::size_t i = ref::at(n, c, p, d.C, d.P());
        const double gi = std::abs(g[c] * dy[i]), xh = (std::abs(x[i]) + std::abs(m[s])) * r[s];
        sg += gi / d.C, sgx += gi * xh / d.C;
      }
      for (int c = 0; c < d.C; ++c) {
        const std::size_t i = ref::at(n, c, p, d.C, d.P());
        const double xh = (std::abs(x[i]) + std::abs(m[s])) * r[s];
        bdx[i] = ctx.gamma(d.C + 8) * r[s] * (std::abs(g[c] * dy[i]) + sg + xh * sgx);
      }
    }
  const Vec dg0 = init_of(ctx, d.C, 37), db0 = init_of(ctx, d.C, 38);
  add_init(ctx, want.dgamma, bdg, dg0, ctx.gamma(terms + 4));
  add_init(ctx, want.dbeta, bdb, db0, ctx.gamma(terms + 1));
  const Tensor tdy = ctx.input(dy, d.shape()), tx = ctx.input(x, d.shape()),
               tg = ctx.master_input(g, {d.C}), tm = ctx.master_input(m, d.stats()),
               tr = ctx.master_input(r, d.stats());
  Tensor tdx = ctx.output(d.shape()), tdg = ctx.master_output({d.C}, dg0), tdb = ctx.master_output({d.C}, db0);
  compute::layernorm_backward(ctx.backend, tdy, tx, tg, tm, tr, tdx, tdg, tdb,
                              ctx.variant.accumulate);
  ctx.expect_within("dx", tdx, want.dx, bdx);
  ctx.expect_within("dgamma", tdg, want.dgamma, bdg);
  ctx.expect_within("dbeta", tdb, want.dbeta, bdb);
}

/// Per-channel statistics as the forward pass hands them over (rounded to the dtype).
struct Stats {
  Vec mean, rstd, gamma, beta;
};
Stats stats_of(Ctx& ctx, int C) {
  return {ctx.master_values(C, 41, -0.5, 0.5), ctx.master_values(C, 42, 0.5, 2.0),
          ctx.master_values(C, 43, 0.5, 1.5), ctx.master_values(C, 44)};
}

void run_channel_moments(Ctx& ctx) {
  const ImageDims d = image_dims(ctx.variant);
  const Vec x = ctx.values(numel(d.shape()), 45);
  const ref::Moments want = ref::channel_moments(x, d.N, d.C, d.P());
  const ref::Moments mag = ref::channel_moments(abs_of(x), d.N, d.C, d.P());
  const std::int64_t terms = std::int64_t(d.N) * d.P();
  const Tensor tx = ctx.input(x, d.shape());
  Tensor ts = ctx.output({d.C}, DType::F64, ctx.variant.layout, {}),
         tq = ctx.output({d.C}, DType::F64, ctx.variant.layout, {});
  compute::channel_moments(ctx.backend, tx, ts, tq);
  ctx.expect_within("sum", ts, want.sum, scaled(mag.sum, ctx.gamma(terms)));
  ctx.expect_within("sumsq", tq, want.sumsq, scaled(mag.sumsq, ctx.gamma(terms + 1)));
}

void run_batchnorm_forward(Ctx& ctx) {
  const ImageDims d = image_dims(ctx.variant);
  const Vec x = ctx.values(numel(d.shape()), 46);
  const Stats s = stats_of(ctx, d.C);
  const Vec want = ref::batchnorm_forward(x, s.mean, s.rstd, s.gamma, s.beta, d.N, d.C, d.P());
  // (x − mean)·rstd·γ + β, or x·(rstd·γ) + (β − mean·rstd·γ): 5 roundings on these magnitudes.
  Vec bound(want.size());
  for (int n = 0; n < d.N; ++n)
    for (int c = 0; c < d.C; ++c)
      for (int p = 0; p < d.P(); ++p) {
        const std::size_t i = ref::at(n, c, p, d.C, d.P());
        bound[i] = ctx.gamma(5) *
                   ((std::abs(x[i]) + std::abs(s.mean[c])) * s.rstd[c] * std::abs(s.gamma[c]) +
                    std::abs(s.beta[c]));
      }
  const Tensor tx = ctx.input(x, d.shape()), tm = ctx.master_input(s.mean, {d.C}),
               tr = ctx.master_input(s.rstd, {d.C}), tg = ctx.master_input(s.gamma, {d.C}),
               tb = ctx.master_input(s.beta, {d.C});
  Tensor ty = ctx.output(d.shape());
  compute::batchnorm_forward(ctx.backend, tx, tm, tr, tg, tb, ty);
  ctx.expect_within("y", ty, want, bound);
}

void run_batchnorm_backward_reduce(Ctx& ctx) {
  const ImageDims d = image_dims(ctx.variant);
  const Vec x = ctx.values(numel(d.shape()), 47), dy = ctx.values(numel(d.shape()), 48);
  const Stats s = stats_of(ctx, d.C);
  const ref::Moments want = ref::batchnorm_backward_reduce(dy, x, s.mean, s.rstd, d.N, d.C, d.P());
  // Σ dy·(x − mean)·rstd, possibly as (Σ dy·x − mean·Σ dy)·rstd: bounded on |dy|·(|x| +
  // |mean|)·rstd.
  Vec bsum(d.C, 0.0), bxh(d.C, 0.0);
  for (int n = 0; n < d.N; ++n)
    for (int c = 0; c < d.C; ++c)
      for (int p = 0; p < d.P(); ++p) {
        const std::size_t i = ref::at(n, c, p, d.C, d.P());
        bsum[c] += std::abs(dy[i]);
        bxh[c] += std::abs(dy[i]) * (std::abs(x[i]) + std::abs(s.mean[c])) * s.rstd[c];
      }
  const std::int64_t terms = std::int64_t(d.N) * d.P();
  const Tensor tdy = ctx.input(dy, d.shape()), tx = ctx.input(x, d.shape()),
               tm = ctx.master_input(s.mean, {d.C}), tr = ctx.master_input(s.rstd, {d.C});
  Tensor t1 = ctx.output({d.C}, DType::F64, ctx.variant.layout, {}),
         t2 = ctx.output({d.C}, DType::F64, ctx.variant.layout, {});
  compute::batchnorm_backward_reduce(ctx.backend, tdy, tx, tm, tr, t1, t2);
  ctx.expect_within("sum_dy", t1, want.sum, scaled(bsum, ctx.gamma(terms)));
  ctx.expect_within("sum_dy_xhat", t2, want.sumsq, scaled(bxh, ctx.gamma(terms + 4)));
}

void run_batchnorm_backward_data(Ctx& ctx) {
  const ImageDims d = image_dims(ctx.variant);
  const Vec x = ctx.values(numel(d.shape()), 49), dy = ctx.values(numel(d.shape()), 50);
  const Stats s = stats_of(ctx, d.C);
  const double count = double(d.N) * d.P() + 2;  // the global batch: other ranks hold more
  const Vec sum_dy = test::values(d.C, 51, DType::F64, -3, 3),
            sum_xh = test::values(d.C, 52, DType::F64, -3, 3);
  const Vec want = ref::batchnorm_backward_data(dy, x, s.mean, s.rstd, s.gamma, sum_dy, sum_xh,
                                                count, d.N, d.C, d.P());
  // γ·rstd·(dy − Σdy/count − x̂·Σdy·x̂/count): the f64 sums may be rounded to the dtype, x̂ as in
  // the reduce; 8 roundings on these magnitudes.
  Vec bound(want.size());
  for (int n = 0; n < d.N; ++n)
    for (int c = 0; c < d.C; ++c)
      for (int p = 0; p < d.P(); ++p) {
        const std::size_t i = ref::at(n, c, p, d.C, d.P());
        const double xh = (std::abs(x[i]) + std::abs(s.mean[c])) * s.rstd[c];
        bound[i] =
            ctx.gamma(8) * std::abs(s.gamma[c]) * s.rstd[c] *
            (std::abs(dy[i]) + std::abs(sum_dy[c]) / count + xh * std::abs(sum_xh[c]) / count);
      }
  const Tensor tdy = ctx.input(dy, d.shape()), tx = ctx.input(x, d.shape()),
               tm = ctx.master_input(s.mean, {d.C}), tr = ctx.master_input(s.rstd, {d.C}),
               tg = ctx.master_input(s.gamma, {d.C});
  const Tensor ts = ctx.input(sum_dy, {d.C}, DType::F64), tq = ctx.input(sum_xh, {d.C}, DType::F64);
  Tensor tdx = ctx.output(d.shape());
  compute::batchnorm_backward_data(ctx.backend, tdy, tx, tm, tr, tg, ts, tq, count, tdx);
  ctx.expect_within("dx", tdx, want, bound);
}

}  // namespace

std::vector<OpCase> linear_norm_cases() {
  return {
      {OpKind::LinearForward, {}, run_linear_forward},
      {OpKind::LinearBackward, {.accumulate = true}, run_linear_backward},
      {OpKind::LayerNormForward, {}, run_layernorm_forward},
      {OpKind::LayerNormBackward, {.accumulate = true}, run_layernorm_backward},
      {OpKind::ChannelMoments, {}, run_channel_moments},
      {OpKind::BatchNormForward, {}, run_batchnorm_forward},
      {OpKind::BatchNormBackwardReduce, {}, run_batchnorm_backward_reduce},
      {OpKind::BatchNormBackwardData, {}, run_batchnorm_backward_data},
  };
}

}  // namespace tessera::test::compute_conformance
