// Conformance cases of the three convolution ops, against tests/support/reference/conv2d_ref.hpp
// with the element-wise bounds of conv2d_bounds. Each variant runs three geometries (a 3×3 with
// padding, a strided and dilated one, a depthwise one) so every kernel path of a backend is met;
// the empty-width variant computes an output window of width 0 of a non-empty input.
//
// bf16/f16 (16-bit x, dy, y, dx; w, bias, dw, db f32 Master slots, or 16-bit in the
// master_in_call_dtype variant): the inputs are generated in their dtype, so exact, and the
// arithmetic is f32, so each bound is conv2d_bounds' with f32's γ_{m+1} (ctx.gamma); a 16-bit
// output adds its one rounding (Ctx::expect_within): |ŷ − y| ≤ b + u·(|y| + b) + η, u = 2^-8
// (bf16) or 2^-11 (f16). That is the op table's definition, and every backend is held to it but
// one that declares compute::Capabilities::rounds_master_to_call_dtype (the cuda backend), which
// in a 16-bit call with f32 Master slots rounds w and bias to the call's dtype and computes dw and
// db in it. Its bound adds exactly the error of those roundings (u = Ctx::master_rounding(), 0
// elsewhere; γ = ctx.gamma(m + 1), u₃₂ = f32's unit roundoff):
//
// - y, dx: ŵ = fl16(w) = w(1 + δ), b̂ = fl16(b) = b(1 + δ'), |δ|, |δ'| ≤ u. The f32 sum of the
//   products with ŵ (and b̂) is within γ·Σ|x||ŵ| ≤ γ(1 + u)·Σ|x||w| of their exact sum, which
//   is within u·Σ|x||w| of Σ x·w: |ŝ − s| ≤ (γ(1 + u) + u)·Σ|x||w| (+ the same factor on |b| in
//   y). So u·Σ|x||w| + u·|b| more than the definition's bound, and γ·u on the same sums for the
//   larger operands; conv2d_bounds run with γ(1 + u) + u for γ gives it. The one rounding of the
//   16-bit y / dx follows as for every backend; an accumulated dx's own term is not rounded by
//   this (γ·|init|).
// - dw, db do not read w: the f32 sum s is within e = γ·Σ|x||dy| of dw as in the definition, and
//   the 16-bit result the backend widens is fl16(s): |fl16(s) − dw| ≤ e + u·(|dw| + e) + η
//   (Ctx::with_master_rounding): u·|dw| on top of the f32-accumulation bound, to first order.
//   With accumulate the widened value is added to init in f32, one more rounding of
//   |init + fl16(s)| ≤ |init| + |dw| + e′ (e′ the bound just stated): γ_{m+1} − γ_m ≥ u₃₂ already
//   covers u₃₂·(|init| + |dw|) (the accumulated term of the sum), so u₃₂·e′ is added.
#include "compute/conformance/conformance.hpp"
#include "support/reference/conv2d_ref.hpp"

namespace tessera::test::compute_conformance {
namespace {

using compute::OpKind;

struct Geometry {
  int k, s, p, d;
  bool depthwise;
};
// 3×3 padded, strided and dilated, depthwise, 1×1 and patchify (the last two: the cpu backend's
// oneDNN path, backends/compute/cpu/README.md).
constexpr Geometry kGeometries[] = {{3, 1, 1, 1, false},
                                    {3, 2, 2, 2, false},
                                    {3, 1, 1, 1, true},
                                    {1, 1, 0, 1, false},
                                    {2, 2, 0, 1, false}};

/// ref + init and bound + γ·|init| when accumulating (init is one more term of each sum).
void accumulate_into(Vec& ref, Vec& bound, const Vec& init, double gamma) {
  for (std::size_t i = 0; i < ref.size(); ++i) {
    ref[i] += init[i];
    bound[i] += gamma * (init[i] < 0 ? -init[i] : init[i]);
  }
}

void run_conv(Ctx& ctx, OpKind op) {
  const Variant& v = ctx.variant;
  for (const Geometry& g : kGeometries) {
    ref::Conv2d c;
    c.n = v.n();
    c.cin = v.dim(3);
    c.h = v.dim(17);
    c.w = v.size == Size::EmptyWidth ? 33 : v.w(33);
    c.cout = g.depthwise ? c.cin : v.dim(5);
    c.kh = c.kw = g.k;
    c.sh = c.sw = g.s;
    c.ph = c.pw = g.p;
    c.dh = c.dw = g.d;
    c.groups = g.depthwise ? c.cin : 1;
    // The empty-width variant asks for an output window of width 0 of this input.
    const int wo = v.size == Size::EmptyWidth ? 0 : c.wo(), ho = c.ho();
    compute::Conv2dParams p;
    p.kernel_h = c.kh, p.kernel_w = c.kw, p.stride_h = c.sh, p.stride_w = c.sw;
    p.pad_h = c.ph, p.pad_w = c.pw, p.dilation_h = c.dh, p.dilation_w = c.dw, p.groups = c.groups;

    const Shape xs{c.n, c.cin, c.h, c.w}, ws{c.cout, c.cin / c.groups, c.kh, c.kw}, bs{c.cout};
    const Shape ys{c.n, c.cout, ho, wo};
    const Vec x = ctx.values(c.x_size(), 11), w = ctx.master_values(c.w_size(), 12),
              b = ctx.master_values(bs[0], 13);
    const Vec dy = ctx.values(numel(ys), 14);
    // The reference on the full output; a 0-width window has zero dy everywhere.
    const Vec dy_full = wo == c.wo() ? dy : Vec(c.y_size(), 0.0);
    // +1: the accumulated term. y and dx with a rounded w and bias: γ(1 + u) + u (the file's
    // comment); dw and db do not read w.
    auto gamma = [&](std::int64_t m) { return ctx.gamma(m + 1); };
    const double u = ctx.master_rounding(), uw = op == OpKind::Conv2dBackwardWeight ? 0.0 : u;
    const ref::Conv2dBounds bound = ref::conv2d_bounds(
        c, x, w, b, dy_full, [&](std::int64_t m) { return gamma(m) * (1 + uw) + uw; });
    const std::int64_t m_dx = std::int64_t(c.cout / c.groups) * c.kh * c.kw,
                       m_dw = std::int64_t(c.n) * ho * wo;
    const std::string what = detail::cat(compute::op_name(op), " k", c.kh, " s", c.sh, " p", c.ph,
                                         " d", c.dh, " g", c.groups);

    if (op == OpKind::Conv2dForward) {
      Vec want = ref::conv2d_forward(c, x, w, b), bnd = bound.y;
      if (wo == 0) want.clear(), bnd.clear();
      const Tensor tx = ctx.input(x, xs), tw = ctx.master_input(w, ws), tb = ctx.master_input(b, bs);
      Tensor ty = ctx.output(ys);
      compute::conv2d_forward(ctx.backend, p, tx, tw, &tb, ty);
      ctx.expect_within(what.c_str(), ty, want, bnd);
    } else if (op == OpKind::Conv2dBackwardData) {
      Vec want = ref::conv2d_backward(c, x, w, dy_full).dx, bnd = bound.dx;
      const Vec init = v.accumulate ? ctx.values(c.x_size(), 15) : Vec{};
      if (v.accumulate) accumulate_into(want, bnd, init, gamma(m_dx));
      const Tensor tdy = ctx.input(dy, ys), tw = ctx.master_input(w, ws);
      Tensor tdx = ctx.output(xs, init);
      compute::conv2d_backward_data(ctx.backend, p, tdy, tw, tdx, v.accumulate);
      ctx.expect_within((what + " dx").c_str(), tdx, want, bnd);
    } else {
      ref::Conv2dGrads want = ref::conv2d_backward(c, x, w, dy_full);
      Vec bdw = ctx.with_master_rounding(want.dw, bound.dw),
          bdb = ctx.with_master_rounding(want.db, bound.db);
      const Vec init_w = v.accumulate ? ctx.master_values(c.w_size(), 16) : Vec{};
      const Vec init_b = v.accumulate ? ctx.master_values(bs[0], 17) : Vec{};
      if (v.accumulate) {
        if (u > 0)  // fl16(s) widened, then added in f32: u₃₂·e′ (the file's comment)
          for (Vec* bnd : {&bdw, &bdb})
            for (double& e : *bnd) e += ctx.unit_roundoff() * e;
        accumulate_into(want.dw, bdw, init_w, gamma(m_dw));
        accumulate_into(want.db, bdb, init_b, gamma(m_dw));
      }
      const Tensor tx = ctx.input(x, xs), tdy = ctx.input(dy, ys);
      Tensor tdw = ctx.master_output(ws, init_w), tdb = ctx.master_output(bs, init_b);
      compute::conv2d_backward_weight(ctx.backend, p, tx, tdy, tdw, &tdb, v.accumulate);
      ctx.expect_within((what + " dw").c_str(), tdw, want.dw, bdw);
      ctx.expect_within((what + " db").c_str(), tdb, want.db, bdb);
    }
  }
}

}  // namespace

std::vector<OpCase> conv_cases() {
  return {
      {OpKind::Conv2dForward, {}, [](Ctx& c) { run_conv(c, OpKind::Conv2dForward); }},
      {OpKind::Conv2dBackwardData,
       {.accumulate = true},
       [](Ctx& c) { run_conv(c, OpKind::Conv2dBackwardData); }},
      {OpKind::Conv2dBackwardWeight,
       {.accumulate = true},
       [](Ctx& c) { run_conv(c, OpKind::Conv2dBackwardWeight); }},
  };
}

}  // namespace tessera::test::compute_conformance
