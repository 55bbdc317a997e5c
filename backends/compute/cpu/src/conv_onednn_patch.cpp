// Patchify convolutions (kernel == stride, no padding: ConvNeXt's stem and downsampling layers)
// through oneDNN's matmul. Per sample, group and block of output pixels, the block's patches are
// gathered into a column block (a permutation: patches do not overlap), multiplied with the
// weights as in conv_onednn.cpp, and for the data gradient scattered back. On 2 Zen 4 threads
// this runs the ConvNeXt-T stem and first downsampling at 90-150 GFLOP/s in f32 and 120-240 in
// bf16, against 75-110 and 30-100 for im2col with Eigen (bf16 widened whole).
#include <algorithm>
#include <cstring>

#include "conv_onednn.hpp"
#include "gemm_util.hpp"
#include "onednn_util.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/half.hpp"

namespace tessera::compute::cpu {

using core::DType;
using core::Tensor;

bool patchify_applies(const Conv2dParams& p, const ConvDims& d) {
  return p.kernel_h == p.stride_h && p.kernel_w == p.stride_w && p.pad_h == 0 && p.pad_w == 0 &&
         p.dilation_h == 1 && p.dilation_w == 1 && p.kernel_h * p.kernel_w > 1 && d.ho > 0 &&
         d.wo > 0 && std::int64_t(d.ho) * p.kernel_h <= d.h &&
         std::int64_t(d.wo) * p.kernel_w <= d.w;
}

#if TESSERA_HAVE_ONEDNN

namespace {

// Output pixels per block: a column block of K × pixels in about 1 MiB of f32, at least 128 and
// at most 2048 pixels. A function of K alone, so results do not depend on the thread count.
int patch_block(std::int64_t k, int pixels) {
  const std::int64_t fit =
      std::clamp<std::int64_t>((std::int64_t(1) << 18) / std::max<std::int64_t>(k, 1), 128, 2048);
  return int(std::min<std::int64_t>(fit, pixels));
}

// The geometry of one call, with the visit of a block's column entries.
struct Patches {
  const ConvDims& d;
  int kh, kw, cpi, cpo, pixels, block, blocks;
  std::int64_t k;
  Patches(const ConvContext& c)
      : d(c.d),
        kh(c.p.kernel_h),
        kw(c.p.kernel_w),
        cpi(c.d.cin / c.p.groups),
        cpo(c.d.cout / c.p.groups),
        pixels(c.d.ho * c.d.wo),
        block(0),
        blocks(0),
        k(std::int64_t(cpi) * kh * kw) {
    block = patch_block(k, pixels);
    blocks = ceil_div(pixels, block);
  }
  int tail() const { return pixels - (blocks - 1) * block; }
  // fn(col_row r, input channel ci, input row ih, first input column, output run [ow0, ow1), its
  // first column q in the block): every run of column row r = (ci, i, j) within one output row.
  template <class Fn>
  void visit(int p0, int np, Fn&& fn) const {
    for (int ci = 0, r = 0; ci < cpi; ++ci)
      for (int i = 0; i < kh; ++i)
        for (int j = 0; j < kw; ++j, ++r)
          for (int pix = p0; pix < p0 + np;) {
            const int oh = pix / d.wo, ow0 = pix % d.wo,
                      ow1 = std::min(d.wo, ow0 + (p0 + np - pix));
            fn(r, ci, oh * kh + i, j, ow0, ow1, pix - p0);
            pix += ow1 - ow0;
          }
  }
};

// col (k × np) = the patches of output pixels [p0, p0 + np) of sample n, group g.
template <class S>
void gather(const Patches& pt, PlaneView<const S> x, int n, int g, int p0, int np, S* col) {
  pt.visit(p0, np, [&](int r, int ci, int ih, int j, int ow0, int ow1, int q) {
    const S* xr = x.row(n, g * pt.cpi + ci, ih) + j;
    S* dst = col + std::int64_t(r) * np + q;
    for (int ow = ow0; ow < ow1; ++ow) dst[ow - ow0] = xr[std::int64_t(ow) * pt.kw];
  });
}

// dx (+)= the columns dcol (k × np, f32) of output pixels [p0, p0 + np), each element rounded once.
template <class S>
void scatter(const Patches& pt, const float* dcol, int n, int g, int p0, int np, PlaneView<S> dx,
             bool accumulate, DType half) {
  pt.visit(p0, np, [&](int r, int ci, int ih, int j, int ow0, int ow1, int q) {
    S* xr = dx.row(n, g * pt.cpi + ci, ih) + j;
    const float* src = dcol + std::int64_t(r) * np + q;
    for (int ow = ow0; ow < ow1; ++ow) {
      S& out = xr[std::int64_t(ow) * pt.kw];
      const float v = src[ow - ow0];
      if constexpr (std::is_same_v<S, float>) {
        out = accumulate ? out + v : v;
      } else {
        const float old = accumulate ? core::half_to_float(out, half) : 0.0f;
        out = core::float_to_half(accumulate ? old + v : v, half);
      }
    }
  });
}

// Zeroes the rows and columns of dx that no patch covers (their gradient is zero).
template <class S>
void zero_uncovered(const Patches& pt, PlaneView<S> dx) {
  const ConvDims& d = pt.d;
  for (int n = 0; n < d.n; ++n)
    for (int ch = 0; ch < d.cin; ++ch)
      for (int h = 0; h < d.h; ++h) {
        S* row = dx.row(n, ch, h);
        const int from = h < d.ho * pt.kh ? d.wo * pt.kw : 0;
        std::fill(row + from, row + d.w, S(0));
      }
}

}  // namespace

template <class S>
void onednn_patch_forward(const ConvContext& c, OnednnCache& cache, PlaneView<const S> x,
                          const float* w, const float* bias, PlaneView<S> y) {
  const Patches pt(c);
  const DType dt = dtype_for<S>(c);
  auto shape = [&](int np) {
    return MatmulShape{dt, dt, pt.cpo, pt.k, np, pt.k, 1, np, 1, y.sc, 1, bias != nullptr};
  };
  const Matmul& full = cache.get(shape(pt.block));
  const Matmul& last = cache.get(shape(pt.tail()));
  Tensor wbuf, bbuf;
  const S* ws = weights_as<S>(c, w, std::int64_t(c.d.cout) * pt.k, wbuf);
  const S* bs = bias ? weights_as<S>(c, bias, c.d.cout, bbuf) : nullptr;
  const std::size_t col_bytes = (pt.k * pt.block * sizeof(S) + 63) / 64 * 64;
  const Scratch scratch(c, std::max(full.scratch_bytes, last.scratch_bytes) + col_bytes);
  c.pool.run(c.d.n * pt.blocks, [&](int task, int worker) {
    OneThread one;
    const int n = task / pt.blocks, b = task % pt.blocks, p0 = b * pt.block;
    const int np = std::min(pt.block, pt.pixels - p0);
    const Matmul& mm = b == pt.blocks - 1 ? last : full;
    S* col = static_cast<S*>(scratch.at(worker));
    void* pad = static_cast<char*>(scratch.at(worker)) + col_bytes;
    for (int g = 0; g < c.p.groups; ++g) {
      gather(pt, x, n, g, p0, np, col);
      S* yb = y.plane(n, g * pt.cpo) + p0;
      if (bs)
        for (int r = 0; r < pt.cpo; ++r)
          std::fill(yb + r * y.sc, yb + r * y.sc + np, bs[g * pt.cpo + r]);
      run_matmul(mm, ws + std::int64_t(g) * pt.cpo * pt.k, col, yb, pad);
    }
  });
}

template <class S>
void onednn_patch_backward_data(const ConvContext& c, OnednnCache& cache, PlaneView<const S> dy,
                                const float* w, PlaneView<S> dx, bool accumulate) {
  const Patches pt(c);
  const DType dt = dtype_for<S>(c);
  // dcol (k × np, f32) = Wᵀ (k × cpo: element (r, o) at o·k + r) · dY block.
  auto shape = [&](int np) {
    return MatmulShape{dt, DType::F32, pt.k, pt.cpo, np, 1, pt.k, dy.sc, 1, np, 1, false};
  };
  const Matmul& full = cache.get(shape(pt.block));
  const Matmul& last = cache.get(shape(pt.tail()));
  Tensor wbuf;
  const S* ws = weights_as<S>(c, w, std::int64_t(c.d.cout) * pt.k, wbuf);
  if (!accumulate) zero_uncovered(pt, dx);
  const std::size_t col_bytes = (pt.k * pt.block * sizeof(float) + 63) / 64 * 64;
  const Scratch scratch(c, std::max(full.scratch_bytes, last.scratch_bytes) + col_bytes);
  c.pool.run(c.d.n * pt.blocks, [&](int task, int worker) {
    OneThread one;
    const int n = task / pt.blocks, b = task % pt.blocks, p0 = b * pt.block;
    const int np = std::min(pt.block, pt.pixels - p0);
    const Matmul& mm = b == pt.blocks - 1 ? last : full;
    auto* dcol = static_cast<float*>(scratch.at(worker));
    void* pad = static_cast<char*>(scratch.at(worker)) + col_bytes;
    for (int g = 0; g < c.p.groups; ++g) {
      run_matmul(mm, ws + std::int64_t(g) * pt.cpo * pt.k, dy.plane(n, g * pt.cpo) + p0, dcol, pad);
      scatter(pt, dcol, n, g, p0, np, dx, accumulate, c.half);
    }
  });
}

template <class S>
void onednn_patch_backward_weight(const ConvContext& c, OnednnCache& cache, PlaneView<const S> x,
                                  PlaneView<const S> dy, float* dw, float* db, bool accumulate) {
  const Patches pt(c);
  const DType dt = dtype_for<S>(c);
  // dW_g (cpo × k) += dY block (cpo × np) · colᵀ (np × k: element (q, r) at r·np + q).
  auto shape = [&](int np) {
    return MatmulShape{dt, DType::F32, pt.cpo, np, pt.k, dy.sc, 1, 1, np, pt.k, 1, true};
  };
  const Matmul& full = cache.get(shape(pt.block));
  const Matmul& last = cache.get(shape(pt.tail()));
  const std::int64_t wsize = std::int64_t(c.d.cout) * pt.k, part = wsize + c.d.cout;
  const int parts = c.pool.size(), total = c.d.n * pt.blocks;
  const std::int64_t stride = part + pt.block;  // + one f32 row for db of 16-bit rows
  Tensor partials = workspace<float>(c, stride * parts);
  const std::size_t col_bytes = (pt.k * pt.block * sizeof(S) + 63) / 64 * 64;
  const Scratch scratch(c, std::max(full.scratch_bytes, last.scratch_bytes) + col_bytes);
  c.pool.run(parts, [&](int t, int worker) {
    OneThread one;
    float* pw = partials.data<float>() + stride * t;
    float* pb = pw + wsize;
    std::fill(pw, pw + part, 0.0f);
    S* col = static_cast<S*>(scratch.at(worker));
    void* pad = static_cast<char*>(scratch.at(worker)) + col_bytes;
    for (int task = total * t / parts; task < total * (t + 1) / parts; ++task) {
      const int n = task / pt.blocks, b = task % pt.blocks, p0 = b * pt.block;
      const int np = std::min(pt.block, pt.pixels - p0);
      const Matmul& mm = b == pt.blocks - 1 ? last : full;
      for (int g = 0; g < c.p.groups; ++g) {
        gather(pt, x, n, g, p0, np, col);
        const S* dyb = dy.plane(n, g * pt.cpo) + p0;
        run_matmul(mm, dyb, col, pw + std::int64_t(g) * pt.cpo * pt.k, pad);
        if (db) add_row_sums(dyb, dy.sc, pt.cpo, np, pb + g * pt.cpo, pw + part, c.half);
      }
    }
  });
  reduce_partials(dw, wsize, partials.data<float>(), parts, stride, accumulate);
  if (db) reduce_partials(db, c.d.cout, partials.data<float>() + wsize, parts, stride, accumulate);
}

#else

template <class S>
void onednn_patch_forward(const ConvContext&, OnednnCache& cache, PlaneView<const S>, const float*,
                          const float*, PlaneView<S>) {
  cache.get({});
}
template <class S>
void onednn_patch_backward_data(const ConvContext&, OnednnCache& cache, PlaneView<const S>,
                                const float*, PlaneView<S>, bool) {
  cache.get({});
}
template <class S>
void onednn_patch_backward_weight(const ConvContext&, OnednnCache& cache, PlaneView<const S>,
                                  PlaneView<const S>, float*, float*, bool) {
  cache.get({});
}

#endif

#define TESSERA_INSTANTIATE(S)                                                                  \
  template void onednn_patch_forward<S>(const ConvContext&, OnednnCache&, PlaneView<const S>,   \
                                        const float*, const float*, PlaneView<S>);              \
  template void onednn_patch_backward_data<S>(                                                  \
      const ConvContext&, OnednnCache&, PlaneView<const S>, const float*, PlaneView<S>, bool);  \
  template void onednn_patch_backward_weight<S>(const ConvContext&, OnednnCache&,               \
                                                PlaneView<const S>, PlaneView<const S>, float*, \
                                                float*, bool);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(std::uint16_t)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::compute::cpu
