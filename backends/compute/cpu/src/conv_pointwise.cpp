// Pointwise convolution: per-sample GEMMs on Eigen maps of the NCHW planes, pixel blocks per task.
#include "conv_pointwise.hpp"

#include "gemm_util.hpp"

namespace tessera::compute::cpu {

namespace {
constexpr int kPixelBlock = kPointwisePixelBlock;
}  // namespace

bool pointwise_applies(const Conv2dParams& p, const ConvDims& d) {
  return p.kernel_h == 1 && p.kernel_w == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 &&
         p.pad_w == 0 && d.ho == d.h && d.wo == d.w;
}

// dst rows (rows × n, `ld` apart) = (accumulate ? dst : bias or 0) + src rows (contiguous, ld n).
template <class T>
void store_rows(T* dst, std::int64_t ld, const T* src, int rows, int n, const T* bias,
                bool accumulate) {
  for (int r = 0; r < rows; ++r) {
    T* d = dst + r * ld;
    const T* s = src + std::int64_t(r) * n;
    if (accumulate) {
      for (int i = 0; i < n; ++i) d[i] += s[i];
    } else {
      const T b = bias ? bias[r] : T(0);
      for (int i = 0; i < n; ++i) d[i] = s[i] + b;
    }
  }
}

template <class T>
void pointwise_forward(const ConvContext& c, PlaneView<const T> x, const T* w, const T* bias,
                       PlaneView<T> y) {
  const ConvDims& d = c.d;
  const int g_n = c.p.groups, cpi = d.cin / g_n, cpo = d.cout / g_n, hw = d.h * d.w;
  const int blocks = ceil_div(hw, kPixelBlock);
  core::Tensor scratch = workspace<T>(c, std::int64_t(cpo) * kPixelBlock * c.pool.size());
  c.pool.run(d.n * blocks, [&](int task, int worker) {
    const int n = task / blocks, p0 = (task % blocks) * kPixelBlock;
    const int np = std::min(kPixelBlock, hw - p0);
    T* tmp = scratch.data<T>() + std::int64_t(cpo) * kPixelBlock * worker;
    for (int g = 0; g < g_n; ++g) {
      auto wg = cmat(w + std::int64_t(g) * cpo * cpi, cpo, cpi, cpi);
      auto xg = cmat(x.plane(n, g * cpi) + p0, cpi, np, x.sc);
      mat(tmp, cpo, np, np).noalias() = wg * xg;
      store_rows(y.plane(n, g * cpo) + p0, y.sc, tmp, cpo, np, bias ? bias + g * cpo : nullptr,
                 false);
    }
  });
}

template <class T>
void pointwise_backward_data(const ConvContext& c, PlaneView<const T> dy, const T* w,
                             PlaneView<T> dx, bool accumulate) {
  const ConvDims& d = c.d;
  const int g_n = c.p.groups, cpi = d.cin / g_n, cpo = d.cout / g_n, hw = d.h * d.w;
  const int blocks = ceil_div(hw, kPixelBlock);
  core::Tensor scratch = workspace<T>(c, std::int64_t(cpi) * kPixelBlock * c.pool.size());
  c.pool.run(d.n * blocks, [&](int task, int worker) {
    const int n = task / blocks, p0 = (task % blocks) * kPixelBlock;
    const int np = std::min(kPixelBlock, hw - p0);
    T* tmp = scratch.data<T>() + std::int64_t(cpi) * kPixelBlock * worker;
    for (int g = 0; g < g_n; ++g) {
      auto wg = cmat(w + std::int64_t(g) * cpo * cpi, cpo, cpi, cpi);
      auto dyg = cmat(dy.plane(n, g * cpo) + p0, cpo, np, dy.sc);
      mat(tmp, cpi, np, np).noalias() = wg.transpose() * dyg;
      store_rows(dx.plane(n, g * cpi) + p0, dx.sc, tmp, cpi, np, static_cast<const T*>(nullptr),
                 accumulate);
    }
  });
}

template <class T>
void pointwise_backward_weight(const ConvContext& c, PlaneView<const T> x, PlaneView<const T> dy,
                               T* dw, T* db, bool accumulate) {
  const ConvDims& d = c.d;
  const int g_n = c.p.groups, cpi = d.cin / g_n, cpo = d.cout / g_n;
  const std::int64_t hw = std::int64_t(d.h) * d.w, total = hw * d.n;
  const std::int64_t wsize = std::int64_t(d.cout) * cpi, part = wsize + d.cout;
  const int parts = c.pool.size();
  core::Tensor scratch = workspace<T>(c, part * parts);
  T* partial = scratch.data<T>();
  // Part t sums columns [t·total/parts, (t+1)·total/parts) of the (sample, pixel) sequence.
  c.pool.run(parts, [&](int t, int) {
    T* pw = partial + part * t;
    T* pb = pw + wsize;
    std::fill(pw, pw + part, T(0));
    const std::int64_t c0 = total * t / parts, c1 = total * (t + 1) / parts;
    for (std::int64_t col = c0; col < c1;) {
      const int n = static_cast<int>(col / hw);
      const std::int64_t p0 = col - n * hw, np = std::min(hw - p0, c1 - col);
      for (int g = 0; g < g_n; ++g) {
        auto xg = cmat(x.plane(n, g * cpi) + p0, cpi, int(np), x.sc);
        auto dyg = cmat(dy.plane(n, g * cpo) + p0, cpo, int(np), dy.sc);
        mat(pw + std::int64_t(g) * cpo * cpi, cpo, cpi, cpi).noalias() += dyg * xg.transpose();
        Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>(pb + g * cpo, cpo) += dyg.rowwise().sum();
      }
      col += np;
    }
  });
  reduce_partials(dw, wsize, partial, parts, part, accumulate);
  if (db) reduce_partials(db, d.cout, partial + wsize, parts, part, accumulate);
}

#define TESSERA_INSTANTIATE(T)                                                                   \
  template void pointwise_forward<T>(const ConvContext&, PlaneView<const T>, const T*, const T*, \
                                     PlaneView<T>);                                              \
  template void pointwise_backward_data<T>(const ConvContext&, PlaneView<const T>, const T*,     \
                                           PlaneView<T>, bool);                                  \
  template void pointwise_backward_weight<T>(const ConvContext&, PlaneView<const T>,             \
                                             PlaneView<const T>, T*, T*, bool);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::compute::cpu
