// Sharded conv2d: exchange halos, convolve the interior while they travel, then the border; in
// backward, compute the halo gradients first, send them, and compute the rest while they travel.
// The windows do not depend on Conv2dOptions::overlap, only when the exchange happens does, so
// overlap on and off give the same bits.
#include "tessera/nn/conv2d.hpp"

#include <chrono>

#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/halo_exchange.hpp"

namespace tessera::nn {

using core::MemCategory;
using core::Range;
using core::Tensor;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Computes the outputs rows × cols (global output indices inside plan.out_box) from the buffer
// `xb` (global input box plan.need) into the matching window of y.
void conv_window(const HaloPlan& plan, const RankContext& ctx, const Tensor& xb, const Tensor& w,
                 const Tensor* b, Tensor& y, const Range& rows, const Range& cols) {
  if (rows.empty() || cols.empty()) return;
  const auto& s = plan.spec;
  Tensor yw = y.narrow(2, rows.begin - plan.out_box.r[2].begin, rows.size())
                  .narrow(3, cols.begin - plan.out_box.r[3].begin, cols.size());
  compute::Conv2dParams p = plan.local_params;
  // First input row/column this window reads, relative to the buffer; negative = zero padding.
  std::int64_t r0 = rows.begin * s.stride_h - s.pad_h - plan.need.r[2].begin;
  std::int64_t c0 = cols.begin * s.stride_w - s.pad_w - plan.need.r[3].begin;
  Tensor xv = xb;
  if (r0 > 0) { xv = xv.narrow(2, r0, xv.size(2) - r0); p.pad_h = 0; } else { p.pad_h = static_cast<int>(-r0); }
  if (c0 > 0) { xv = xv.narrow(3, c0, xv.size(3) - c0); p.pad_w = 0; } else { p.pad_w = static_cast<int>(-c0); }
  compute::conv2d_forward(*ctx.compute, p, xv, w, b, yw);
}

// Calls f(rows, cols) for each band of the frame of rows × cols around in_rows × in_cols: the
// full-width top and bottom bands, then the left and right strips of the inner rows.
template <class F>
void for_each_frame_band(const Range& rows, const Range& cols, const Range& in_rows, const Range& in_cols, F&& f) {
  f(Range{rows.begin, in_rows.begin}, cols);
  f(Range{in_rows.end, rows.end}, cols);
  f(in_rows, Range{cols.begin, in_cols.begin});
  f(in_rows, Range{in_cols.end, cols.end});
}

// ⌊a / b⌋ for b > 0 and any a.
std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Computes the buffer gradient over rows × cols (global input indices inside plan.need) from the
// output-gradient rows and columns whose taps reach them, into the matching window of dbuf: every
// contribution to the window and nothing else, so the window holds what the whole-buffer call
// would (up to summation order, which depends only on the window).
void dconv_window(const HaloPlan& plan, const RankContext& ctx, const Tensor& dy_own, const Tensor& w,
                  Tensor& dbuf, const Range& rows, const Range& cols) {
  if (rows.empty() || cols.empty()) return;
  compute::Conv2dParams p = plan.local_params;
  Tensor dxw = dbuf.narrow(2, rows.begin - plan.need.r[2].begin, rows.size())
                   .narrow(3, cols.begin - plan.need.r[3].begin, cols.size());
  Tensor dyw = dy_own;
  // Input i = o·stride − pad + k·dilation (global). Output rows from the first whose last tap can
  // reach the window (rounded down: the window's local padding stays ≥ 0) to the last whose first
  // tap does, within this rank's outputs.
  auto window = [&](int dim, const ConvDim& d, const Range& in, int& local_pad) {
    const Range out = plan.out_box.r[std::size_t(dim)];
    const std::int64_t first = std::max(out.begin, floor_div(in.begin + d.pad - (d.span() - 1), d.stride));
    const std::int64_t end = std::min(out.end, floor_div(in.end - 1 + d.pad, d.stride) + 1);
    if (end <= first) return false;
    dyw = dyw.narrow(dim, first - out.begin, end - first);
    local_pad = static_cast<int>(d.pad + in.begin - first * d.stride);
    return true;
  };
  if (!window(2, conv_dim_h(plan.spec), rows, p.pad_h) || !window(3, conv_dim_w(plan.spec), cols, p.pad_w)) {
    dxw.zero();  // no output gradient reaches the window
    return;
  }
  compute::conv2d_backward_data(*ctx.compute, p, dyw, w, dxw, false);
}

void check_args(const HaloPlan& plan, const RankContext& ctx, const Tensor& w) {
  TESSERA_CHECK(ctx.compute != nullptr, plan.spec.describe(), ": rank ", plan.rank, " has no compute backend");
  TESSERA_CHECK(ctx.world != nullptr || !plan.exchanges(), plan.spec.describe(), ": rank ", plan.rank,
                " must exchange halos but has no communicator");
  TESSERA_CHECK(w.shape() == plan.spec.weight_shape(), plan.spec.describe(), ": weight ", w.describe(),
                " should have shape ", core::shape_str(plan.spec.weight_shape()));
}

}  // namespace

Tensor conv2d_forward(const HaloPlan& plan, const RankContext& ctx, const Tensor& x_own, const Tensor& w,
                      const Tensor* b, Conv2dSaved* saved, const Conv2dOptions& options, Conv2dTimes* times,
                      Conv2dHalos* halos) {
  check_args(plan, ctx, w);
  const Tensor* bias = (b && b->defined()) ? b : nullptr;
  Tensor y = Tensor::empty(plan.out_box.shape(), x_own.dtype(), MemCategory::Activation, ctx.allocator);
  Conv2dTimes t;
  auto t0 = Clock::now();
  HaloExchange ex(plan, ctx.world, ctx.allocator, ctx.compute);
  const bool replay = halos && halos->use == Conv2dHalos::Use::Replay;
  if (replay) {
    ex.replay_forward(x_own, halos->pieces);
  } else {
    ex.start_forward(x_own);
  }
  t.exchange_s += seconds_since(t0);

  const Range out_h = plan.out_box.r[2], out_w = plan.out_box.r[3];
  Range in_rows = out_h, in_cols = out_w;  // interior window: reads no halo
  if (!plan.recvs.empty()) {
    in_rows = conv_interior_outputs(out_h, plan.own.r[2], plan.in_shape[2], conv_dim_h(plan.spec));
    in_cols = conv_interior_outputs(out_w, plan.own.r[3], plan.in_shape[3], conv_dim_w(plan.spec));
  }
  auto interior = [&] {
    const auto c0 = Clock::now();
    if (!plan.need.empty()) conv_window(plan, ctx, ex.buffer(), w, bias, y, in_rows, in_cols);
    t.compute_s += seconds_since(c0);
  };
  if (options.overlap || replay) interior();  // while the halos travel

  t0 = Clock::now();
  const Tensor& xb =
      replay ? ex.buffer() : ex.finish_forward(halos && halos->use == Conv2dHalos::Use::Keep ? &halos->pieces : nullptr);
  t.exchange_s += seconds_since(t0);
  if (!options.overlap && !replay) interior();

  t0 = Clock::now();
  if (!plan.need.empty() && !(in_rows == out_h && in_cols == out_w)) {
    if (in_rows.empty() || in_cols.empty()) {
      conv_window(plan, ctx, xb, w, bias, y, out_h, out_w);
    } else {
      for_each_frame_band(out_h, out_w, in_rows, in_cols, [&](const Range& r, const Range& c) {
        conv_window(plan, ctx, xb, w, bias, y, r, c);
      });
    }
  }
  t.compute_s += seconds_since(t0);
  if (saved) saved->x_ext = xb;
  if (times) *times = t;
  return y;
}

Conv2dGrads conv2d_backward(const HaloPlan& plan, const RankContext& ctx, const Conv2dSaved& saved,
                            const Tensor& w, const Tensor& dy_own, bool need_dx, bool bias,
                            const Conv2dOptions& options, Conv2dTimes* times, Tensor* dw_into,
                            Tensor* db_into) {
  check_args(plan, ctx, w);
  TESSERA_CHECK(dy_own.shape() == plan.out_box.shape(), plan.spec.describe(), ": rank ", plan.rank,
                " got output gradient ", dy_own.describe(), " but produces ",
                core::shape_str(plan.out_box.shape()));
  TESSERA_CHECK(saved.x_ext.defined() && saved.x_ext.shape() == plan.need.shape(), plan.spec.describe(),
                ": rank ", plan.rank, ": the saved input is missing or has the wrong shape; run the forward with a Conv2dSaved");
  const core::DType dt = dy_own.dtype();
  Conv2dGrads g;
  Conv2dTimes t;
  const bool accumulate = dw_into != nullptr;
  TESSERA_CHECK(!accumulate || !bias || db_into != nullptr, plan.spec.describe(),
                ": accumulating weight gradients needs a bias gradient tensor too");
  if (accumulate) {
    g.dw = *dw_into;
    if (bias) g.db = *db_into;
  } else {
    // Weight gradients take the weight's dtype (f32 master weights under mixed precision).
    g.dw = Tensor::empty(w.shape(), w.dtype(), MemCategory::Gradient, ctx.allocator);
    if (bias) g.db = Tensor::empty({plan.spec.out_channels}, w.dtype(), MemCategory::Gradient, ctx.allocator);
  }
  const compute::Conv2dParams& p = plan.local_params;
  auto weight_grads = [&] {
    auto t0 = Clock::now();
    if (plan.need.empty()) {
      if (!accumulate) {
        g.dw.zero();
        if (bias) g.db.zero();
      }
    } else {
      compute::conv2d_backward_weight(*ctx.compute, p, saved.x_ext, dy_own, g.dw, bias ? &g.db : nullptr,
                                      accumulate);
    }
    t.compute_s += seconds_since(t0);
  };
  if (!need_dx) {
    weight_grads();
    if (times) *times = t;
    return g;
  }
  auto t0 = Clock::now();
  Tensor dbuf = Tensor::empty(plan.need.shape(), dt, MemCategory::Activation, ctx.allocator);
  // The part of the buffer this rank owns (its gradient stays here) and the frame around it (the
  // halo rows and columns, whose gradients go to their owners): the frame first, so that it can
  // travel while the rest is computed.
  // One window where there is nothing foreign (the whole buffer is this rank's), nothing of its
  // own, or a frame that is not spatial only.
  const Box mine = plan.need.intersect(plan.own);
  const bool framed = !plan.need.empty() && !plan.recvs.empty() && !mine.empty() &&
                      mine.r[0] == plan.need.r[0] && mine.r[1] == plan.need.r[1];
  if (framed) {
    for_each_frame_band(plan.need.r[2], plan.need.r[3], mine.r[2], mine.r[3], [&](const Range& r, const Range& c) {
      dconv_window(plan, ctx, dy_own, w, dbuf, r, c);
    });
  } else if (!plan.need.empty()) {
    compute::conv2d_backward_data(*ctx.compute, p, dy_own, w, dbuf, false);
  }
  t.compute_s += seconds_since(t0);
  auto own_part = [&] {  // what remains of the buffer gradient once the frame is sent
    if (!framed) return;
    const auto c0 = Clock::now();
    dconv_window(plan, ctx, dy_own, w, dbuf, mine.r[2], mine.r[3]);
    t.compute_s += seconds_since(c0);
  };
  if (!options.overlap) own_part();

  t0 = Clock::now();
  HaloExchange ex(plan, ctx.world, ctx.allocator, ctx.compute);
  ex.start_backward(dbuf);
  t.exchange_s += seconds_since(t0);
  if (options.overlap) {  // while the halo gradients travel
    own_part();
    weight_grads();
  }
  t0 = Clock::now();
  g.dx = ex.finish_backward();
  t.exchange_s += seconds_since(t0);
  if (!options.overlap) weight_grads();
  if (times) *times = t;
  return g;
}

}  // namespace tessera::nn
