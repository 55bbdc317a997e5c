// Depthwise convolution, forward and backward-data: shifted-row sums over zero-padded row buffers.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "conv_depthwise.hpp"
#include "tap_row.hpp"

namespace tessera::compute::cpu {

bool depthwise_applies(const Conv2dParams& p, const ConvDims& d) {
  return p.groups == d.cin && d.cin == d.cout;
}

namespace detail {

PhaseRows phase_rows(const Conv2dParams& p, int wo, int lanes) {
  PhaseRows pr;
  pr.sw = p.stride_w;
  pr.pad_w = p.pad_w;
  const int wneed = (std::max(wo, 1) - 1) * p.stride_w + (p.kernel_w - 1) * p.dilation_w + 1;
  pr.phase_len = ceil_div(wneed, p.stride_w) + lanes;
  return pr;
}

template <class T>
void fill_phase_row(const PhaseRows& pr, const T* src, int w, T* dst) {
  if (pr.sw == 1) {  // xpad[m] = src[m − pad]
    const int lead = std::min(pr.pad_w, pr.phase_len);
    const int n = std::clamp(pr.phase_len - pr.pad_w, 0, w);
    std::fill(dst, dst + lead, T(0));
    std::copy(src, src + n, dst + lead);
    std::fill(dst + lead + n, dst + pr.phase_len, T(0));
    return;
  }
  for (int r = 0; r < pr.sw; ++r) {
    T* d = dst + r * pr.phase_len;
    for (int m = 0; m < pr.phase_len; ++m) {
      const int col = m * pr.sw + r - pr.pad_w;
      d[m] = (col >= 0 && col < w) ? src[col] : T(0);
    }
  }
}

template void fill_phase_row<float>(const PhaseRows&, const float*, int, float*);
template void fill_phase_row<double>(const PhaseRows&, const double*, int, double*);

}  // namespace detail

namespace {
constexpr std::int64_t kRowBudgetElems = 48 * 1024;  // buffered input rows per task (L2-sized)
// Rows of `row_len` elements that fit the budget (at least `min_rows`).
int fit_rows(int row_len, int min_rows) {
  return static_cast<int>(std::max<std::int64_t>(kRowBudgetElems / std::max(row_len, 1), min_rows));
}
}  // namespace

template <class S>
void depthwise_forward(const ConvContext& c, PlaneView<const S> x, const compute_t<S>* w,
                       const compute_t<S>* bias, PlaneView<S> y) {
  using T = compute_t<S>;
  constexpr bool kWiden = !std::is_same_v<S, T>;  // 16-bit rows: widened in, narrowed out
  const Conv2dParams& p = c.p;
  const ConvDims& d = c.d;
  const detail::PhaseRows pr = detail::phase_rows(p, d.wo, simd::kLanes<T>);
  const int halo = (p.kernel_h - 1) * p.dilation_h + 1;  // input rows one output row reads
  const int fit = (fit_rows(pr.row_len(), halo) - halo) / p.stride_h + 1;
  const int rows = split_rows(fit, d.ho, d.n * d.cout, c.pool.size());
  const int buf_rows = std::min(d.h, (rows - 1) * p.stride_h + (p.kernel_h - 1) * p.dilation_h + 1);
  // 16-bit storage: one widened input row and one f32 output row besides the buffered rows.
  const std::int64_t io_len = kWiden ? d.w + d.wo : 0;
  const std::int64_t per_worker = std::int64_t(buf_rows) * pr.row_len() + io_len;
  core::Tensor scratch = workspace<T>(c, per_worker * c.pool.size());
  const int taps = p.kernel_h * p.kernel_w;
  std::vector<const T*> srcs(std::size_t(taps) * c.pool.size());
  std::vector<T> coefs(srcs.size());
  const int blocks = ceil_div(d.ho, rows);

  c.pool.run(d.n * d.cout * blocks, [&](int task, int worker) {
    const int plane = task / blocks, oh0 = (task % blocks) * rows;
    const int n = plane / d.cout, ch = plane % d.cout;
    const int oh1 = std::min(d.ho, oh0 + rows);
    const int ih_lo = std::max(0, oh0 * p.stride_h - p.pad_h);
    const int ih_hi =
        std::min(d.h, (oh1 - 1) * p.stride_h - p.pad_h + (p.kernel_h - 1) * p.dilation_h + 1);
    T* buf = scratch.data<T>() + per_worker * worker;
    T* in_row = buf + std::int64_t(buf_rows) * pr.row_len();
    T* out_row = in_row + d.w;
    for (int ih = ih_lo; ih < ih_hi; ++ih) {
      T* dst = buf + std::int64_t(ih - ih_lo) * pr.row_len();
      if constexpr (kWiden) {
        load_row(x.row(n, ch, ih), in_row, d.w, c.half);
        detail::fill_phase_row(pr, static_cast<const T*>(in_row), d.w, dst);
      } else {
        detail::fill_phase_row(pr, x.row(n, ch, ih), d.w, dst);
      }
    }
    const T* src_w = w + std::int64_t(ch) * taps;
    const T** src = srcs.data() + std::size_t(taps) * worker;
    T* coef = coefs.data() + std::size_t(taps) * worker;
    const T b = bias ? bias[ch] : T(0);
    for (int oh = oh0; oh < oh1; ++oh) {
      int nt = 0;
      for (int i = 0; i < p.kernel_h; ++i) {
        const int ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
        if (ih < ih_lo || ih >= ih_hi) continue;
        const T* row = buf + std::int64_t(ih - ih_lo) * pr.row_len();
        for (int j = 0; j < p.kernel_w; ++j, ++nt) {
          src[nt] = pr.tap(row, j * p.dilation_w);
          coef[nt] = src_w[i * p.kernel_w + j];
        }
      }
      if constexpr (kWiden) {
        tap_sum_row<T>(out_row, d.wo, src, coef, nt, b, nullptr);
        store_row(static_cast<const T*>(out_row), y.row(n, ch, oh), d.wo, c.half);
      } else {
        tap_sum_row<T>(y.row(n, ch, oh), d.wo, src, coef, nt, b, nullptr);
      }
    }
  });
}

template <class S>
void depthwise_backward_data(const ConvContext& c, PlaneView<const S> dy, const compute_t<S>* w,
                             PlaneView<S> dx, bool accumulate) {
  using T = compute_t<S>;
  constexpr bool kWiden = !std::is_same_v<S, T>;  // 16-bit rows: widened in, narrowed out
  const Conv2dParams& p = c.p;
  const ConvDims& d = c.d;
  constexpr int L = simd::kLanes<T>;
  const int sw = p.stride_w;
  // dy rows are buffered with `lpad` zeros in front, so every tap starts at index >= 0.
  const int lpad = ceil_div((p.kernel_w - 1) * p.dilation_w, sw);
  const int qmax = ceil_div(d.w, sw);  // dx columns per stride phase
  const int row_len = lpad + qmax + floor_div(sw - 1 + p.pad_w, sw) + L + 1;
  // Tasks are blocks of dx rows; `rows` dx rows read at most buf_rows(rows) buffered dy rows.
  const int reach = (p.kernel_h - 1) * p.dilation_h;
  const int fit = (fit_rows(row_len, 2) - 1) * p.stride_h - reach + 1;
  const int rows = split_rows(fit, d.h, d.n * d.cin, c.pool.size());
  const int buf_rows = std::min(d.ho, ceil_div(rows - 1 + reach, p.stride_h) + 1);
  // 16-bit storage: one f32 dx row, written whole and narrowed once.
  const std::int64_t per_worker = std::int64_t(buf_rows) * row_len + (sw > 1 ? qmax + L : 0) + (kWiden ? d.w : 0);
  core::Tensor scratch = workspace<T>(c, per_worker * c.pool.size());
  const int taps = p.kernel_h * p.kernel_w;
  std::vector<const T*> srcs(std::size_t(taps) * c.pool.size());
  std::vector<T> coefs(srcs.size());
  const int blocks = ceil_div(d.h, rows);

  c.pool.run(d.n * d.cin * blocks, [&](int task, int worker) {
    const int plane = task / blocks, ih0 = (task % blocks) * rows;
    const int n = plane / d.cin, ch = plane % d.cin;
    const int ih1 = std::min(d.h, ih0 + rows);
    const int oh_lo =
        std::max(0, ceil_div(ih0 + p.pad_h - (p.kernel_h - 1) * p.dilation_h, p.stride_h));
    const int oh_hi = std::min(d.ho, floor_div(ih1 - 1 + p.pad_h, p.stride_h) + 1);
    T* buf = scratch.data<T>() + per_worker * worker;
    T* tmp = buf + std::int64_t(buf_rows) * row_len;
    T* dx_row = tmp + (sw > 1 ? qmax + L : 0);
    for (int oh = oh_lo; oh < oh_hi; ++oh) {
      T* dst = buf + std::int64_t(oh - oh_lo) * row_len;
      const int n_in = std::min(d.wo, row_len - lpad);
      std::fill(dst, dst + lpad, T(0));
      load_row(dy.row(n, ch, oh), dst + lpad, n_in, c.half);
      std::fill(dst + lpad + n_in, dst + row_len, T(0));
    }
    const T* src_w = w + std::int64_t(ch) * taps;
    const T** src = srcs.data() + std::size_t(taps) * worker;
    T* coef = coefs.data() + std::size_t(taps) * worker;
    for (int ih = ih0; ih < ih1; ++ih) {
      T* out;
      if constexpr (kWiden) {
        out = dx_row;
        if (accumulate) load_row(static_cast<const S*>(dx.row(n, ch, ih)), dx_row, d.w, c.half);
      } else {
        out = dx.row(n, ch, ih);
      }
      for (int r = 0; r < sw; ++r) {  // dx columns q·sw + r
        const int qn = ceil_div(d.w - r, sw);
        if (qn <= 0) continue;
        int nt = 0;
        for (int i = 0; i < p.kernel_h; ++i) {
          const int t = ih + p.pad_h - i * p.dilation_h;
          const int oh = floor_div(t, p.stride_h);
          if (oh * p.stride_h != t || oh < oh_lo || oh >= oh_hi) continue;
          const T* row = buf + std::int64_t(oh - oh_lo) * row_len + lpad;
          for (int j = 0; j < p.kernel_w; ++j) {
            const int u = r + p.pad_w - j * p.dilation_w;
            const int q0 = floor_div(u, sw);
            if (q0 * sw != u) continue;
            src[nt] = row + q0;
            coef[nt++] = src_w[i * p.kernel_w + j];
          }
        }
        if (sw == 1) {
          tap_sum_row<T>(out, qn, src, coef, nt, T(0), accumulate ? out : nullptr);
        } else {
          tap_sum_row<T>(tmp, qn, src, coef, nt, T(0), nullptr);
          if (accumulate)
            for (int q = 0; q < qn; ++q) out[q * sw + r] += tmp[q];
          else
            for (int q = 0; q < qn; ++q) out[q * sw + r] = tmp[q];
        }
      }
      if constexpr (kWiden) store_row(static_cast<const T*>(dx_row), dx.row(n, ch, ih), d.w, c.half);
    }
  });
}

#define TESSERA_INSTANTIATE(S)                                                                 \
  template void depthwise_forward<S>(const ConvContext&, PlaneView<const S>, const compute_t<S>*, \
                                     const compute_t<S>*, PlaneView<S>);                           \
  template void depthwise_backward_data<S>(const ConvContext&, PlaneView<const S>,                \
                                           const compute_t<S>*, PlaneView<S>, bool);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
TESSERA_INSTANTIATE(std::uint16_t)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::compute::cpu
