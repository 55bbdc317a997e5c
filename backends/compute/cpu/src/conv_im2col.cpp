// im2col / col2im and the im2col forward convolution.
#include "conv_im2col.hpp"

#include "gemm_util.hpp"

namespace tessera::compute::cpu {

namespace detail {

// Calls fn(k, ci, i, j, oh, ow0, ow1, pix) for every column row k and every run of output pixels
// [ow0, ow1) of row oh inside [p0, p0 + np); pix is the run's first pixel minus p0.
template <class Fn>
void for_each_col_run(const Conv2dParams& p, const ConvDims& d, int p0, int np, Fn&& fn) {
  const int cpi = d.cin / p.groups;
  for (int ci = 0, k = 0; ci < cpi; ++ci)
    for (int i = 0; i < p.kernel_h; ++i)
      for (int j = 0; j < p.kernel_w; ++j, ++k)
        for (int pix = p0; pix < p0 + np;) {
          const int oh = pix / d.wo, ow0 = pix % d.wo;
          const int ow1 = std::min(d.wo, ow0 + (p0 + np - pix));
          fn(k, ci, i, j, oh, ow0, ow1, pix - p0);
          pix += ow1 - ow0;
        }
}

template <class T>
void fill_col(const Conv2dParams& p, const ConvDims& d, PlaneView<const T> x, int n, int g, int p0,
              int np, T* col) {
  const int cpi = d.cin / p.groups;
  for_each_col_run(
      p, d, p0, np, [&](int k, int ci, int i, int j, int oh, int ow0, int ow1, int pix) {
        T* dst = col + std::int64_t(k) * np + pix;  // dst[ow − ow0] for ow in [ow0, ow1)
        const int ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
        const int off = j * p.dilation_w - p.pad_w;
        int lo = ow0, hi = ow0;
        if (ih >= 0 && ih < d.h) {
          valid_range(d.wo, d.w, p.stride_w, off, lo, hi);
          lo = std::clamp(lo, ow0, ow1);
          hi = std::clamp(hi, lo, ow1);
        }
        std::fill(dst, dst + (lo - ow0), T(0));
        if (hi > lo) {
          const T* xr = x.row(n, g * cpi + ci, ih);
          if (p.stride_w == 1) {
            std::copy(xr + (lo + off), xr + (hi + off), dst + (lo - ow0));
          } else {
            for (int ow = lo; ow < hi; ++ow) dst[ow - ow0] = xr[ow * p.stride_w + off];
          }
        }
        std::fill(dst + (hi - ow0), dst + (ow1 - ow0), T(0));
      });
}

template <class T>
void col2im_add(const Conv2dParams& p, const ConvDims& d, const T* col, int n, int g, int p0,
                int np, PlaneView<T> dx) {
  const int cpi = d.cin / p.groups;
  for_each_col_run(p, d, p0, np,
                   [&](int k, int ci, int i, int j, int oh, int ow0, int ow1, int pix) {
                     const int ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
                     if (ih < 0 || ih >= d.h) return;
                     const T* src = col + std::int64_t(k) * np + pix;  // src[ow − ow0]
                     const int off = j * p.dilation_w - p.pad_w;
                     int lo, hi;
                     valid_range(d.wo, d.w, p.stride_w, off, lo, hi);
                     lo = std::clamp(lo, ow0, ow1);
                     hi = std::clamp(hi, lo, ow1);
                     T* xr = dx.row(n, g * cpi + ci, ih);
                     for (int ow = lo; ow < hi; ++ow) xr[ow * p.stride_w + off] += src[ow - ow0];
                   });
}

template void fill_col<float>(const Conv2dParams&, const ConvDims&, PlaneView<const float>, int,
                              int, int, int, float*);
template void fill_col<double>(const Conv2dParams&, const ConvDims&, PlaneView<const double>, int,
                               int, int, int, double*);
template void col2im_add<float>(const Conv2dParams&, const ConvDims&, const float*, int, int, int,
                                int, PlaneView<float>);
template void col2im_add<double>(const Conv2dParams&, const ConvDims&, const double*, int, int, int,
                                 int, PlaneView<double>);

}  // namespace detail

template <class T>
void im2col_forward(const ConvContext& c, PlaneView<const T> x, const T* w, const T* bias,
                    PlaneView<T> y) {
  const Conv2dParams& p = c.p;
  const ConvDims& d = c.d;
  const int cpo = d.cout / p.groups, k = d.cin / p.groups * p.kernel_h * p.kernel_w;
  const int pixels = d.ho * d.wo, block = detail::col_block_pixels(k, d, c.pool.size());
  const int blocks = ceil_div(pixels, block);
  core::Tensor scratch = workspace<T>(c, std::int64_t(k) * block * c.pool.size());
  c.pool.run(d.n * blocks, [&](int task, int worker) {
    const int n = task / blocks, p0 = (task % blocks) * block, np = std::min(block, pixels - p0);
    T* col = scratch.data<T>() + std::int64_t(k) * block * worker;
    for (int g = 0; g < p.groups; ++g) {
      detail::fill_col(p, d, x, n, g, p0, np, col);
      auto wg = cmat(w + std::int64_t(g) * cpo * k, cpo, k, k);
      T* yp = y.plane(n, g * cpo) + p0;
      auto yg = mat(yp, cpo, np, y.sc);
      if (bias) {
        fill_rows(yp, cpo, np, y.sc, bias + g * cpo);
        yg.noalias() += wg * cmat<T>(col, k, np, np);
      } else {
        yg.noalias() = wg * cmat<T>(col, k, np, np);
      }
    }
  });
}

template void im2col_forward<float>(const ConvContext&, PlaneView<const float>, const float*,
                                    const float*, PlaneView<float>);
template void im2col_forward<double>(const ConvContext&, PlaneView<const double>, const double*,
                                     const double*, PlaneView<double>);

}  // namespace tessera::compute::cpu
