// Direct-loop convolution kernels (the readable version every fast path is checked against).
#include "conv_generic.hpp"

#include <algorithm>
#include <cstring>

namespace tessera::compute::cpu {

template <class T>
void conv2d_forward_generic(const Conv2dParams& p, const T* x, const T* w, const T* bias, T* y,
                            int n, int cin, int h, int wd, int cout, int ho, int wo) {
  const int cpg_in = cin / p.groups, cpg_out = cout / p.groups;
  for (int b = 0; b < n; ++b)
    for (int co = 0; co < cout; ++co) {
      const int g = co / cpg_out;
      T* yp = y + (static_cast<std::size_t>(b) * cout + co) * ho * wo;
      const T b0 = bias ? bias[co] : T(0);
      for (int i = 0; i < ho * wo; ++i) yp[i] = b0;
      for (int ci = 0; ci < cpg_in; ++ci) {
        const T* xp = x + (static_cast<std::size_t>(b) * cin + g * cpg_in + ci) * h * wd;
        const T* wp = w + (static_cast<std::size_t>(co) * cpg_in + ci) * p.kernel_h * p.kernel_w;
        for (int i = 0; i < p.kernel_h; ++i)
          for (int j = 0; j < p.kernel_w; ++j) {
            const T wv = wp[i * p.kernel_w + j];
            for (int oh = 0; oh < ho; ++oh) {
              const int ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
              if (ih < 0 || ih >= h) continue;
              for (int ow = 0; ow < wo; ++ow) {
                const int iw = ow * p.stride_w - p.pad_w + j * p.dilation_w;
                if (iw < 0 || iw >= wd) continue;
                yp[oh * wo + ow] += wv * xp[ih * wd + iw];
              }
            }
          }
      }
    }
}

template <class T>
void conv2d_backward_data_generic(const Conv2dParams& p, const T* dy, const T* w, T* dx, int n,
                                  int cin, int h, int wd, int cout, int ho, int wo, bool accumulate) {
  const int cpg_in = cin / p.groups, cpg_out = cout / p.groups;
  if (!accumulate) std::fill(dx, dx + static_cast<std::size_t>(n) * cin * h * wd, T(0));
  for (int b = 0; b < n; ++b)
    for (int co = 0; co < cout; ++co) {
      const int g = co / cpg_out;
      const T* dyp = dy + (static_cast<std::size_t>(b) * cout + co) * ho * wo;
      for (int ci = 0; ci < cpg_in; ++ci) {
        T* dxp = dx + (static_cast<std::size_t>(b) * cin + g * cpg_in + ci) * h * wd;
        const T* wp = w + (static_cast<std::size_t>(co) * cpg_in + ci) * p.kernel_h * p.kernel_w;
        for (int i = 0; i < p.kernel_h; ++i)
          for (int j = 0; j < p.kernel_w; ++j) {
            const T wv = wp[i * p.kernel_w + j];
            for (int oh = 0; oh < ho; ++oh) {
              const int ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
              if (ih < 0 || ih >= h) continue;
              for (int ow = 0; ow < wo; ++ow) {
                const int iw = ow * p.stride_w - p.pad_w + j * p.dilation_w;
                if (iw < 0 || iw >= wd) continue;
                dxp[ih * wd + iw] += wv * dyp[oh * wo + ow];
              }
            }
          }
      }
    }
}

template <class T>
void conv2d_backward_weight_generic(const Conv2dParams& p, const T* x, const T* dy, T* dw, T* db,
                                    int n, int cin, int h, int wd, int cout, int ho, int wo,
                                    bool accumulate) {
  const int cpg_in = cin / p.groups, cpg_out = cout / p.groups;
  const std::size_t wsize = static_cast<std::size_t>(cout) * cpg_in * p.kernel_h * p.kernel_w;
  if (!accumulate) {
    std::fill(dw, dw + wsize, T(0));
    if (db) std::fill(db, db + cout, T(0));
  }
  for (int b = 0; b < n; ++b)
    for (int co = 0; co < cout; ++co) {
      const int g = co / cpg_out;
      const T* dyp = dy + (static_cast<std::size_t>(b) * cout + co) * ho * wo;
      if (db) {
        T s = 0;
        for (int i = 0; i < ho * wo; ++i) s += dyp[i];
        db[co] += s;
      }
      for (int ci = 0; ci < cpg_in; ++ci) {
        const T* xp = x + (static_cast<std::size_t>(b) * cin + g * cpg_in + ci) * h * wd;
        T* wp = dw + (static_cast<std::size_t>(co) * cpg_in + ci) * p.kernel_h * p.kernel_w;
        for (int i = 0; i < p.kernel_h; ++i)
          for (int j = 0; j < p.kernel_w; ++j) {
            T s = 0;
            for (int oh = 0; oh < ho; ++oh) {
              const int ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
              if (ih < 0 || ih >= h) continue;
              for (int ow = 0; ow < wo; ++ow) {
                const int iw = ow * p.stride_w - p.pad_w + j * p.dilation_w;
                if (iw < 0 || iw >= wd) continue;
                s += xp[ih * wd + iw] * dyp[oh * wo + ow];
              }
            }
            wp[i * p.kernel_w + j] += s;
          }
      }
    }
}

#define TESSERA_INSTANTIATE(T)                                                                   \
  template void conv2d_forward_generic<T>(const Conv2dParams&, const T*, const T*, const T*, T*, \
                                          int, int, int, int, int, int, int);                    \
  template void conv2d_backward_data_generic<T>(const Conv2dParams&, const T*, const T*, T*, int, \
                                                int, int, int, int, int, int, bool);             \
  template void conv2d_backward_weight_generic<T>(const Conv2dParams&, const T*, const T*, T*, T*, \
                                                  int, int, int, int, int, int, int, bool);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::compute::cpu
