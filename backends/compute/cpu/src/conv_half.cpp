// Convolutions of bf16/f16 activations with f32 weights that convert inside the kernel instead of
// through whole-tensor f32 copies (half_calls.cpp), which for a large image cost more than the
// convolution itself (bench_conv --precision bf16):
// - depthwise: the f32 kernels of conv_depthwise*.cpp on 16-bit storage (S = std::uint16_t), which
//   widen rows as they buffer them and round each output row once;
// - pointwise (1×1), here: the 16-bit operands are widened block by block into per-thread f32
//   scratch that stays in cache, the GEMM runs in f32 (Eigen, as the f32 path) and each output
//   row is rounded once on its way back.
// Both give the bits of the widened path (the same f32 arithmetic on the same values), except the
// pointwise weight gradient, which sums its columns in blocks (within the f32 sum's bound).
#include "conv_depthwise.hpp"
#include "conv_onednn.hpp"
#include "conv_pointwise.hpp"
#include "convert.hpp"
#include "cpu_ops.hpp"
#include "gemm_util.hpp"
#include "tensor_access.hpp"
#include "tessera/compute/op_table.hpp"
#include "tessera/core/half.hpp"

namespace tessera::compute::cpu {

namespace {

using core::DType;
using core::Tensor;

// Pixels per forward/backward-data task, the f32 kernels' (the same GEMMs), and columns per step
// of the weight gradient: a cpi × 512 and a cpo × 512 f32 block fit in L2 for C ≤ 512.
constexpr int kPixelBlock = kPointwisePixelBlock;
constexpr int kWeightColumns = 512;

bool planes_contiguous(const Tensor& t) { return t.ndim() == 4 && meets(t, Need::Planes); }

PlaneView<const std::uint16_t> half_view(const Tensor& t) {
  return {static_cast<const std::uint16_t*>(t.raw_data()), t.stride(0), t.stride(1), t.stride(2)};
}
PlaneView<std::uint16_t> half_view(Tensor& t) {
  return {static_cast<std::uint16_t*>(t.raw_data()), t.stride(0), t.stride(1), t.stride(2)};
}

// rows × np f32 at dst (ld np) = the 16-bit rows src + r·ld, r < rows.
void widen_rows(const std::uint16_t* src, std::int64_t ld, int rows, int np, float* dst, DType dt) {
  for (int r = 0; r < rows; ++r) widen(src + r * ld, dst + std::int64_t(r) * np, np, dt);
}

void forward(const ConvContext& c, DType dt, PlaneView<const std::uint16_t> x, const float* w,
             const float* bias, PlaneView<std::uint16_t> y) {
  const ConvDims& d = c.d;
  const int g_n = c.p.groups, cpi = d.cin / g_n, cpo = d.cout / g_n, hw = d.h * d.w;
  const int blocks = ceil_div(hw, kPixelBlock);
  const std::int64_t per_worker = std::int64_t(cpi + cpo) * kPixelBlock;
  Tensor scratch = workspace<float>(c, per_worker * c.pool.size());
  c.pool.run(d.n * blocks, [&](int task, int worker) {
    const int n = task / blocks, p0 = (task % blocks) * kPixelBlock;
    const int np = std::min(kPixelBlock, hw - p0);
    float* xb = scratch.data<float>() + per_worker * worker;
    float* tmp = xb + std::int64_t(cpi) * kPixelBlock;
    for (int g = 0; g < g_n; ++g) {
      widen_rows(x.plane(n, g * cpi) + p0, x.sc, cpi, np, xb, dt);
      auto wg = cmat(w + std::int64_t(g) * cpo * cpi, cpo, cpi, cpi);
      mat(tmp, cpo, np, np).noalias() = wg * cmat(xb, cpi, np, np);
      for (int r = 0; r < cpo; ++r) {
        float* s = tmp + std::int64_t(r) * np;
        if (bias)
          for (int i = 0; i < np; ++i) s[i] += bias[g * cpo + r];
        narrow(s, y.plane(n, g * cpo + r) + p0, np, dt);
      }
    }
  });
}

void backward_data(const ConvContext& c, DType dt, PlaneView<const std::uint16_t> dy, const float* w,
                   PlaneView<std::uint16_t> dx, bool accumulate) {
  const ConvDims& d = c.d;
  const int g_n = c.p.groups, cpi = d.cin / g_n, cpo = d.cout / g_n, hw = d.h * d.w;
  const int blocks = ceil_div(hw, kPixelBlock);
  const std::int64_t per_worker = std::int64_t(cpo + cpi) * kPixelBlock + kPixelBlock;
  Tensor scratch = workspace<float>(c, per_worker * c.pool.size());
  c.pool.run(d.n * blocks, [&](int task, int worker) {
    const int n = task / blocks, p0 = (task % blocks) * kPixelBlock;
    const int np = std::min(kPixelBlock, hw - p0);
    float* dyb = scratch.data<float>() + per_worker * worker;
    float* tmp = dyb + std::int64_t(cpo) * kPixelBlock;
    float* old = tmp + std::int64_t(cpi) * kPixelBlock;
    for (int g = 0; g < g_n; ++g) {
      widen_rows(dy.plane(n, g * cpo) + p0, dy.sc, cpo, np, dyb, dt);
      auto wg = cmat(w + std::int64_t(g) * cpo * cpi, cpo, cpi, cpi);
      mat(tmp, cpi, np, np).noalias() = wg.transpose() * cmat(dyb, cpo, np, np);
      for (int r = 0; r < cpi; ++r) {
        float* s = tmp + std::int64_t(r) * np;
        std::uint16_t* out = dx.plane(n, g * cpi + r) + p0;
        if (accumulate) {
          widen(out, old, np, dt);
          for (int i = 0; i < np; ++i) s[i] = old[i] + s[i];
        }
        narrow(s, out, np, dt);
      }
    }
  });
}

// dW (+)= Σ dY·Xᵀ and db (+)= Σ dY in f32, each thread over its own contiguous range of (sample,
// pixel) columns in steps of kWeightColumns, the partials added in thread order (deterministic
// for a given thread count, as the f32 kernel).
void backward_weight(const ConvContext& c, DType dt, PlaneView<const std::uint16_t> x,
                     PlaneView<const std::uint16_t> dy, float* dw, float* db, bool accumulate) {
  const ConvDims& d = c.d;
  const int g_n = c.p.groups, cpi = d.cin / g_n, cpo = d.cout / g_n;
  const std::int64_t hw = std::int64_t(d.h) * d.w, total = hw * d.n;
  const std::int64_t wsize = std::int64_t(d.cout) * cpi, part = wsize + d.cout;
  const std::int64_t blocks = std::int64_t(cpi + cpo) * kWeightColumns;
  const int parts = c.pool.size();
  Tensor scratch = workspace<float>(c, (part + blocks) * parts);
  c.pool.run(parts, [&](int t, int) {
    float* pw = scratch.data<float>() + (part + blocks) * t;
    float* pb = pw + wsize;
    float* xb = pw + part;
    float* dyb = xb + std::int64_t(cpi) * kWeightColumns;
    std::fill(pw, pw + part, 0.0f);
    const std::int64_t c0 = total * t / parts, c1 = total * (t + 1) / parts;
    for (std::int64_t col = c0; col < c1;) {
      const int n = static_cast<int>(col / hw);
      const std::int64_t p0 = col - n * hw;
      const int np = int(std::min({hw - p0, c1 - col, std::int64_t(kWeightColumns)}));
      for (int g = 0; g < g_n; ++g) {
        widen_rows(x.plane(n, g * cpi) + p0, x.sc, cpi, np, xb, dt);
        widen_rows(dy.plane(n, g * cpo) + p0, dy.sc, cpo, np, dyb, dt);
        auto xg = cmat(xb, cpi, np, np);
        auto dyg = cmat(dyb, cpo, np, np);
        mat(pw + std::int64_t(g) * cpo * cpi, cpo, cpi, cpi).noalias() += dyg * xg.transpose();
        Eigen::Map<Eigen::VectorXf>(pb + g * cpo, cpo) += dyg.rowwise().sum();
      }
      col += np;
    }
  });
  const float* partial = scratch.data<float>();
  const std::int64_t stride = part + blocks;
  reduce_partials(dw, wsize, partial, parts, stride, accumulate);
  if (db) reduce_partials(db, d.cout, partial + wsize, parts, stride, accumulate);
}

bool f32_contiguous(const Tensor* t) { return t == nullptr || (t->dtype() == DType::F32 && t->is_contiguous()); }

// The f32 weight-side operands of a call: w and bias (forward), w (backward-data), dw and db
// (backward-weight); false when one of them is not dense f32 (run_widened takes such calls).
struct Masters {
  const float* w = nullptr;
  const float* bias = nullptr;
  float* dw = nullptr;
  float* db = nullptr;
};
bool masters_of(const OpCall& call, Masters& m) {
  auto defined = [](auto* t) { return t && t->defined() ? t : nullptr; };
  if (call.kind == OpKind::Conv2dBackwardWeight) {
    Tensor* dw = &call.output("dw");
    Tensor* db = defined(call.output_if("db"));
    if (!f32_contiguous(dw) || !f32_contiguous(db)) return false;
    m.dw = dw->data<float>();
    m.db = db ? db->data<float>() : nullptr;
    return true;
  }
  const Tensor& w = call.input("w");
  const Tensor* bias = call.kind == OpKind::Conv2dForward ? defined(call.input_if("bias")) : nullptr;
  if (!f32_contiguous(&w) || !f32_contiguous(bias)) return false;
  m.w = w.data<float>();
  m.bias = bias ? bias->data<float>() : nullptr;
  return true;
}

}  // namespace

bool run_half_conv(const OpCall& call, ThreadPool& pool, OnednnCache& onednn, ConvAlgo forced) {
  if (!compute::is_conv(call.kind) || forced == ConvAlgo::Generic || forced == ConvAlgo::Im2col) return false;
  const Conv2dParams& p = call.conv;
  const bool fwd = call.kind == OpKind::Conv2dForward, bwd_data = call.kind == OpKind::Conv2dBackwardData;
  // The activation-side tensors (16-bit): x or dx, and y or dy.
  const Tensor& x = fwd ? call.input("x") : bwd_data ? call.output("dx") : call.input("x");
  const Tensor& y = fwd ? call.output("y") : call.input("dy");
  const DType dt = x.dtype();
  if (!core::dtype_is_half(dt) || y.dtype() != dt || x.ndim() != 4 || y.ndim() != 4) return false;
  const Tensor& w = call.kind == OpKind::Conv2dBackwardWeight ? call.output("dw") : call.input("w");
  if (w.ndim() != 4) return false;
  const ConvDims d = dims_of(x, w, y);
  if (std::int64_t(d.n) * d.cin * d.h * d.w * d.cout * d.ho * d.wo == 0) return false;
  const ConvContext ctx{p, d, pool, x.allocator(), dt};
  if ((forced == ConvAlgo::Auto || forced == ConvAlgo::Onednn) && onednn_applies(p, d, dt) &&
      planes_contiguous(x) && planes_contiguous(y)) {
    Masters m;
    if (!masters_of(call, m)) return false;
    const bool pw = pointwise_applies(p, d);
    switch (call.kind) {
      case OpKind::Conv2dForward: {
        PlaneView<std::uint16_t> out = half_view(call.output("y"));
        if (pw)
          onednn_pointwise_forward<std::uint16_t>(ctx, onednn, half_view(x), m.w, m.bias, out);
        else
          onednn_patch_forward<std::uint16_t>(ctx, onednn, half_view(x), m.w, m.bias, out);
        return true;
      }
      case OpKind::Conv2dBackwardData: {
        PlaneView<std::uint16_t> out = half_view(call.output("dx"));
        if (pw)
          onednn_pointwise_backward_data<std::uint16_t>(ctx, onednn, half_view(y), m.w, out,
                                                        call.accumulate);
        else
          onednn_patch_backward_data<std::uint16_t>(ctx, onednn, half_view(y), m.w, out,
                                                    call.accumulate);
        return true;
      }
      case OpKind::Conv2dBackwardWeight:
        if (pw)
          onednn_pointwise_backward_weight<std::uint16_t>(ctx, onednn, half_view(x), half_view(y),
                                                          m.dw, m.db, call.accumulate);
        else
          onednn_patch_backward_weight<std::uint16_t>(ctx, onednn, half_view(x), half_view(y), m.dw,
                                                      m.db, call.accumulate);
        return true;
      default:
        return false;
    }
  }
  if (forced == ConvAlgo::Onednn) return false;
  // Depthwise needs rows with unit W stride, pointwise contiguous planes (its GEMM operands).
  const bool depthwise = depthwise_applies(p, d) && forced != ConvAlgo::Pointwise;
  if (depthwise ? (forced != ConvAlgo::Auto && forced != ConvAlgo::Depthwise) || !meets(x, Need::UnitW) ||
                      !meets(y, Need::UnitW)
                : (forced != ConvAlgo::Auto && forced != ConvAlgo::Pointwise) || !pointwise_applies(p, d) ||
                      !planes_contiguous(x) || !planes_contiguous(y))
    return false;
  Masters m;
  if (!masters_of(call, m)) return false;
  switch (call.kind) {
    case OpKind::Conv2dForward: {
      PlaneView<std::uint16_t> out = half_view(call.output("y"));
      if (depthwise)
        depthwise_forward<std::uint16_t>(ctx, half_view(x), m.w, m.bias, out);
      else
        forward(ctx, dt, half_view(x), m.w, m.bias, out);
      return true;
    }
    case OpKind::Conv2dBackwardData: {
      PlaneView<std::uint16_t> out = half_view(call.output("dx"));
      if (depthwise)
        depthwise_backward_data<std::uint16_t>(ctx, half_view(y), m.w, out, call.accumulate);
      else
        backward_data(ctx, dt, half_view(y), m.w, out, call.accumulate);
      return true;
    }
    case OpKind::Conv2dBackwardWeight:
      if (depthwise)
        depthwise_backward_weight<std::uint16_t>(ctx, half_view(x), half_view(y), m.dw, m.db, call.accumulate);
      else
        backward_weight(ctx, dt, half_view(x), half_view(y), m.dw, m.db, call.accumulate);
      return true;
    default: return false;
  }
}

}  // namespace tessera::compute::cpu
