// Depthwise convolution, weight gradient: per channel, row dot products with vector accumulators.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "conv_depthwise.hpp"
#include "simd.hpp"

namespace tessera::compute::cpu {

namespace {

constexpr std::int64_t kRowBudgetElems = 48 * 1024;

// acc[jj] += Σ_v d[v]·xs[jj][v] over `nvec` vectors, two independent accumulator sets to hide
// the FMA latency (summed in a fixed order at the end).
template <class T, int JB>
void row_dots(const T* d, int nvec, const T* const* xs, simd::Vec<T>* acc) {
  using V = simd::Vec<T>;
  constexpr int L = simd::kLanes<T>;
  V a0[JB], a1[JB];
#pragma GCC unroll 8
  for (int j = 0; j < JB; ++j) a0[j] = a1[j] = V{};
  int v = 0;
  for (; v + 2 <= nvec; v += 2) {
    const V d0 = simd::load(d + v * L), d1 = simd::load(d + (v + 1) * L);
#pragma GCC unroll 8
    for (int j = 0; j < JB; ++j) {
      a0[j] += d0 * simd::load(xs[j] + v * L);
      a1[j] += d1 * simd::load(xs[j] + (v + 1) * L);
    }
  }
  if (v < nvec) {
    const V d0 = simd::load(d + v * L);
#pragma GCC unroll 8
    for (int j = 0; j < JB; ++j) a0[j] += d0 * simd::load(xs[j] + v * L);
  }
#pragma GCC unroll 8
  for (int j = 0; j < JB; ++j) acc[j] += a0[j] + a1[j];
}

template <class T>
void row_dots_n(int jb, const T* d, int nvec, const T* const* xs, simd::Vec<T>* acc) {
  switch (jb) {
    case 1:
      return row_dots<T, 1>(d, nvec, xs, acc);
    case 2:
      return row_dots<T, 2>(d, nvec, xs, acc);
    case 3:
      return row_dots<T, 3>(d, nvec, xs, acc);
    case 4:
      return row_dots<T, 4>(d, nvec, xs, acc);
    case 5:
      return row_dots<T, 5>(d, nvec, xs, acc);
    case 6:
      return row_dots<T, 6>(d, nvec, xs, acc);
    case 7:
      return row_dots<T, 7>(d, nvec, xs, acc);
    default:
      return row_dots<T, 8>(d, nvec, xs, acc);
  }
}

}  // namespace

template <class S>
void depthwise_backward_weight(const ConvContext& c, PlaneView<const S> x, PlaneView<const S> dy,
                               compute_t<S>* dw, compute_t<S>* db, bool accumulate) {
  using T = compute_t<S>;
  constexpr bool kWiden = !std::is_same_v<S, T>;  // 16-bit rows: widened as they are buffered
  using V = simd::Vec<T>;
  constexpr int L = simd::kLanes<T>;
  const Conv2dParams& p = c.p;
  const ConvDims& d = c.d;
  const detail::PhaseRows pr = detail::phase_rows(p, d.wo, L);
  const int nvec = ceil_div(d.wo, L);
  const int dy_len = nvec * L;  // dy rows buffered with a zero tail up to a whole vector
  const int halo = (p.kernel_h - 1) * p.dilation_h + 1;
  const int rows = std::clamp(
      static_cast<int>(
          (std::max<std::int64_t>(kRowBudgetElems / pr.row_len(), halo) - halo) / p.stride_h + 1),
      1, std::max(d.ho, 1));
  const int buf_rows = std::min(d.h, (rows - 1) * p.stride_h + halo);
  const std::int64_t per_worker = std::int64_t(buf_rows) * pr.row_len() + dy_len + (kWiden ? d.w : 0);
  core::Tensor scratch = workspace<T>(c, per_worker * c.pool.size());
  const int taps = p.kernel_h * p.kernel_w;
  std::vector<V> accs(std::size_t(taps + 1) * c.pool.size());

  c.pool.run(d.cout, [&](int ch, int worker) {
    T* xbuf = scratch.data<T>() + per_worker * worker;
    T* dybuf = xbuf + std::int64_t(buf_rows) * pr.row_len();
    V* acc = accs.data() + std::size_t(taps + 1) * worker;  // taps, then the bias
    std::fill(acc, acc + taps + 1, V{});
    const T* xs[8];
    for (int n = 0; n < d.n; ++n)
      for (int oh0 = 0; oh0 < d.ho; oh0 += rows) {
        const int oh1 = std::min(d.ho, oh0 + rows);
        const int ih_lo = std::max(0, oh0 * p.stride_h - p.pad_h);
        const int ih_hi = std::min(d.h, (oh1 - 1) * p.stride_h - p.pad_h + halo);
        for (int ih = ih_lo; ih < ih_hi; ++ih) {
          T* dst = xbuf + std::int64_t(ih - ih_lo) * pr.row_len();
          if constexpr (kWiden) {
            T* in_row = dybuf + dy_len;
            load_row(x.row(n, ch, ih), in_row, d.w, c.half);
            detail::fill_phase_row(pr, static_cast<const T*>(in_row), d.w, dst);
          } else {
            detail::fill_phase_row(pr, x.row(n, ch, ih), d.w, dst);
          }
        }
        for (int oh = oh0; oh < oh1; ++oh) {
          T* dr = dybuf;
          load_row(dy.row(n, ch, oh), dr, d.wo, c.half);
          std::fill(dr + d.wo, dr + dy_len, T(0));
          V sum{};
          for (int v = 0; v < nvec; ++v) sum += simd::load(dr + v * L);
          acc[taps] += sum;
          for (int i = 0; i < p.kernel_h; ++i) {
            const int ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
            if (ih < ih_lo || ih >= ih_hi) continue;
            const T* row = xbuf + std::int64_t(ih - ih_lo) * pr.row_len();
            for (int j0 = 0; j0 < p.kernel_w; j0 += 8) {
              const int jb = std::min(8, p.kernel_w - j0);
              for (int j = 0; j < jb; ++j) xs[j] = pr.tap(row, (j0 + j) * p.dilation_w);
              row_dots_n<T>(jb, dr, nvec, xs, acc + i * p.kernel_w + j0);
            }
          }
        }
      }
    T* dwc = dw + std::int64_t(ch) * taps;
    for (int t = 0; t < taps; ++t) dwc[t] = (accumulate ? dwc[t] : T(0)) + simd::hsum<T>(acc[t]);
    if (db) db[ch] = (accumulate ? db[ch] : T(0)) + simd::hsum<T>(acc[taps]);
  });
}

template void depthwise_backward_weight<float>(const ConvContext&, PlaneView<const float>,
                                               PlaneView<const float>, float*, float*, bool);
template void depthwise_backward_weight<std::uint16_t>(const ConvContext&, PlaneView<const std::uint16_t>,
                                                       PlaneView<const std::uint16_t>, float*, float*, bool);
template void depthwise_backward_weight<double>(const ConvContext&, PlaneView<const double>,
                                                PlaneView<const double>, double*, double*, bool);

}  // namespace tessera::compute::cpu
