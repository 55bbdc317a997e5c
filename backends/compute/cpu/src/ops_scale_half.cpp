// Per-channel and per-sample scaling (LayerScale and drop path: scale_channels, its backward,
// scale_samples) of bf16/f16 activations by f32 Master scales, run on the 16-bit storage: each
// plane goes in chunks of kFlatChunk pixels through per-worker f32 buffers (widened, scaled in
// f32, rounded once), so a call gives the bits of the widened one (half_calls.cpp) without its
// whole-tensor copies. ds sums each plane in the same lanes and order as the f32 kernel's dot_d
// (chunks are multiples of the vector width), so it has its bits too.
#include <cstdint>
#include <vector>

#include "convert.hpp"
#include "cpu_ops.hpp"
#include "ops_common.hpp"
#include "ops_simd.hpp"
#include "tessera/compute/op_table.hpp"

namespace tessera::compute::cpu {

namespace {

using core::DType;
using core::Tensor;
using ops::kFlatChunk;
using ops::Ncp;
using ops::Split;
using ops::Vec;

static_assert(kFlatChunk % ops::kLanes<float> == 0, "chunks must keep dot_d's lanes");

// A 16-bit tensor of dtype dt as an Ncp view in place, or nothing when its pixels are not one run.
template <class S>
bool half_view(const Tensor* t, DType dt, Split split, Ncp<S>& v) {
  if (t == nullptr || t->dtype() != dt || !ops::has_ncp_view(*t, split)) return false;
  const Ncp<char> g = ops::ncp_geometry(*t, split);
  v = {static_cast<S*>(t->raw_data()), g.n, g.c, g.p, g.sn, g.sc};
  return true;
}

// Element (n, c) of an f32 scale of shape (N) (per sample), (C) or (N,C).
float scale_at(const Tensor& s, Split split, std::int64_t n, std::int64_t c) {
  const float* p = s.data<float>();
  if (split == Split::Samples) return p[n * s.stride(0)];
  return s.ndim() == 2 ? p[n * s.stride(0) + c * s.stride(1)] : p[c * s.stride(0)];
}

// In place: buf[i] *= k, as the f32 kernels' scale_row.
void scale_buffer(float* buf, std::int64_t n, float k) {
  ops::vec_for<float>(n, [&](std::int64_t i, auto len) {
    ops::vstore(buf + i, ops::vload(buf + i, len) * k, len);
  });
}

// y = x·s over (n, c) planes (c = 0 alone for scale_samples).
bool forward(const OpCall& call, ThreadPool& pool, Split split) {
  const Tensor& x = call.input("x");
  const Tensor& s = call.input("s");
  const DType dt = x.dtype();
  Ncp<const std::uint16_t> xv;
  Ncp<std::uint16_t> yv;
  if (s.dtype() != DType::F32 || !half_view(&x, dt, split, xv) ||
      !half_view(call.out[0], dt, split, yv))
    return false;
  const ops::Scratch<float> buf(x, pool.size(), kFlatChunk, 0);
  const std::int64_t pieces = std::max<std::int64_t>(1, ops::ceil_div(xv.p, kFlatChunk));
  ops::parallel_units(pool, xv.n * xv.c * pieces, std::min(xv.p, kFlatChunk),
                      [&](std::int64_t u, int worker) {
                        const std::int64_t plane = u / pieces, n = plane / xv.c, c = plane % xv.c,
                                           b = (u % pieces) * kFlatChunk;
                        const std::int64_t len = std::min(kFlatChunk, xv.p - b);
                        float* f = buf.ts(worker);
                        widen(xv.plane(n, c) + b, f, len, dt);
                        scale_buffer(f, len, scale_at(s, split, n, c));
                        narrow(f, yv.plane(n, c) + b, len, dt);
                      });
  return true;
}

// ds (+)= Σ dy·x per channel (per (n, c) for a (N,C) scale), dx = dy·s where asked.
bool backward(const OpCall& call, ThreadPool& pool) {
  const Tensor& dy = call.input("dy");
  const Tensor& s = call.input("s");
  Tensor& ds = call.output("ds");
  const DType dt = dy.dtype();
  Ncp<const std::uint16_t> dyv, xv;
  Ncp<std::uint16_t> dxv;
  const bool want_dx = call.output_if("dx") != nullptr;
  if (s.dtype() != DType::F32 || ds.dtype() != DType::F32 ||
      !half_view(&dy, dt, Split::Channels, dyv) ||
      !half_view(&call.input("x"), dt, Split::Channels, xv) ||
      (want_dx && !half_view(call.output_if("dx"), dt, Split::Channels, dxv)))
    return false;
  const bool per_sample = s.ndim() == 2;
  const std::int64_t units = per_sample ? xv.n * xv.c : xv.c, samples = per_sample ? 1 : xv.n;
  const ops::Scratch<float> buf(dy, pool.size(), 2 * kFlatChunk, 0);
  ops::parallel_units(pool, units, samples * xv.p, [&](std::int64_t u, int worker) {
    const std::int64_t c = u % xv.c, n0 = per_sample ? u / xv.c : 0;
    float* fdy = buf.ts(worker);
    float* fx = fdy + kFlatChunk;
    double acc = 0;
    for (std::int64_t n = n0; n < n0 + samples; ++n) {
      ops::AccVec<float> lanes{};  // dot_d's accumulators, carried across the plane's chunks
      for (std::int64_t b = 0; b < xv.p; b += kFlatChunk) {
        const std::int64_t len = std::min(kFlatChunk, xv.p - b);
        widen(dyv.plane(n, c) + b, fdy, len, dt);
        widen(xv.plane(n, c) + b, fx, len, dt);
        ops::vec_for<float>(len, [&](std::int64_t i, auto l) {
          lanes +=
              ops::widen<float>(ops::vload(fdy + i, l)) * ops::widen<float>(ops::vload(fx + i, l));
        });
        if (!want_dx) continue;
        scale_buffer(fdy, len, scale_at(s, Split::Channels, n, c));
        narrow(fdy, dxv.plane(n, c) + b, len, dt);
      }
      acc += ops::lanes_sum(lanes);
    }
    float& d =
        ds.data<float>()[per_sample ? n0 * ds.stride(0) + c * ds.stride(1) : c * ds.stride(0)];
    d = static_cast<float>((call.accumulate ? double(d) : 0.0) + acc);
  });
  return true;
}

}  // namespace

bool run_half_scale(const OpCall& call, ThreadPool& pool) {
  const Tensor* lead = float_lead(call);
  if (lead == nullptr || lead->numel() <= kFlatChunk)
    return false;  // small calls fit in cache widened
  switch (call.kind) {
    case OpKind::ScaleChannels:
      return forward(call, pool, Split::Channels);
    case OpKind::ScaleSamples:
      return forward(call, pool, Split::Samples);
    case OpKind::ScaleChannelsBackward:
      return backward(call, pool);
    default:
      return false;
  }
}

}  // namespace tessera::compute::cpu
