// im2col convolution, backward: col2im of Wᵀ·dY in two non-overlapping waves; dW from partials.
#include "conv_im2col.hpp"
#include "gemm_util.hpp"

namespace tessera::compute::cpu {

template <class T>
void im2col_backward_data(const ConvContext& c, PlaneView<const T> dy, const T* w, PlaneView<T> dx,
                          bool accumulate) {
  const Conv2dParams& p = c.p;
  const ConvDims& d = c.d;
  const int cpo = d.cout / p.groups, k = d.cin / p.groups * p.kernel_h * p.kernel_w;
  // Blocks of `rows` output rows; blocks b and b + 2 read disjoint input rows when
  // rows·stride_h ≥ (kh − 1)·dilation_h + 1 − stride_h.
  const int min_rows =
      std::max(1, ceil_div((p.kernel_h - 1) * p.dilation_h + 1 - p.stride_h, p.stride_h));
  const int fit = static_cast<int>(detail::kColBudgetElems / (std::int64_t(k) * std::max(d.wo, 1)));
  const int rows = std::max(min_rows, split_rows(fit, d.ho, d.n, c.pool.size()));
  const int blocks = ceil_div(d.ho, rows);
  const std::int64_t per_worker = std::int64_t(k) * rows * d.wo;
  core::Tensor scratch = workspace<T>(c, per_worker * c.pool.size());

  if (!accumulate)
    c.pool.run(d.n * d.cin, [&](int plane, int) {
      for (int ih = 0; ih < d.h; ++ih) {
        T* r = dx.row(plane / d.cin, plane % d.cin, ih);
        std::fill(r, r + d.w, T(0));
      }
    });
  for (int wave = 0; wave < 2; ++wave) {
    const int per_sample = (blocks - wave + 1) / 2;  // blocks wave, wave + 2, ...
    c.pool.run(d.n * per_sample, [&](int task, int worker) {
      const int n = task / per_sample, b = wave + 2 * (task % per_sample);
      const int p0 = b * rows * d.wo, np = std::min(rows, d.ho - b * rows) * d.wo;
      T* col = scratch.data<T>() + per_worker * worker;
      for (int g = 0; g < p.groups; ++g) {
        auto wg = cmat(w + std::int64_t(g) * cpo * k, cpo, k, k);
        auto dyg = cmat(dy.plane(n, g * cpo) + p0, cpo, np, dy.sc);
        mat(col, k, np, np).noalias() = wg.transpose() * dyg;
        detail::col2im_add(p, d, col, n, g, p0, np, dx);
      }
    });
  }
}

template <class T>
void im2col_backward_weight(const ConvContext& c, PlaneView<const T> x, PlaneView<const T> dy,
                            T* dw, T* db, bool accumulate) {
  const Conv2dParams& p = c.p;
  const ConvDims& d = c.d;
  const int cpo = d.cout / p.groups, k = d.cin / p.groups * p.kernel_h * p.kernel_w;
  const int pixels = d.ho * d.wo, block = detail::col_block_pixels(k, d, c.pool.size());
  const int blocks = ceil_div(pixels, block), items = d.n * blocks;
  const int parts = c.pool.size();
  const std::int64_t wsize = std::int64_t(d.cout) * k, part = wsize + d.cout;
  const std::int64_t col_size = std::int64_t(k) * block;
  core::Tensor scratch = workspace<T>(c, part * parts + col_size * c.pool.size());
  T* partial = scratch.data<T>();
  // Part t sums items [t·items/parts, (t+1)·items/parts) (item = sample, pixel block).
  c.pool.run(parts, [&](int t, int worker) {
    T* pw = partial + part * t;
    T* pb = pw + wsize;
    T* col = partial + part * parts + col_size * worker;
    std::fill(pw, pw + part, T(0));
    for (int item = items * t / parts; item < items * (t + 1) / parts; ++item) {
      const int n = item / blocks, p0 = (item % blocks) * block, np = std::min(block, pixels - p0);
      for (int g = 0; g < p.groups; ++g) {
        detail::fill_col(p, d, x, n, g, p0, np, col);
        auto dyg = cmat(dy.plane(n, g * cpo) + p0, cpo, np, dy.sc);
        mat(pw + std::int64_t(g) * cpo * k, cpo, k, k).noalias() +=
            dyg * cmat<T>(col, k, np, np).transpose();
        Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>(pb + g * cpo, cpo) += dyg.rowwise().sum();
      }
    }
  });
  reduce_partials(dw, wsize, partial, parts, part, accumulate);
  if (db) reduce_partials(db, d.cout, partial + wsize, parts, part, accumulate);
}

#define TESSERA_INSTANTIATE(T)                                                            \
  template void im2col_backward_data<T>(const ConvContext&, PlaneView<const T>, const T*, \
                                        PlaneView<T>, bool);                              \
  template void im2col_backward_weight<T>(const ConvContext&, PlaneView<const T>,         \
                                          PlaneView<const T>, T*, T*, bool);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::compute::cpu
