// Softmax cross-entropy over dim 1 of logits (N, K, P…) against i64 labels (N, P…); labels < 0
// are ignored. Passes: (1, 2) the label check — per tile the first label ≥ K, then the first over
// tiles — read back so that the caller throws before anything is written; (3) one item per pixel:
// the max over classes, Σ e^(x − max) in double, the pixel's loss term −log softmax at its label
// into the workspace, dlogits = (softmax − onehot)·grad_scale; (4, 5) the loss = Σ of the terms in
// the fixed tile order (reduce.hpp). Consecutive items are consecutive pixels (coalesced class
// rows). Memory-bound for small K: logits are read 3 times (2 from L2 for small K) and dlogits
// written once, ≥ 70% of the GPU's copy bandwidth; e^x costs more for large K.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hd.hpp"
#include "pass.hpp"
#include "reduce.hpp"
#include "view.hpp"

namespace tessera::compute::cuda::kernels {

template <class T>
struct SoftmaxCeParams {
  View<const T> logits;
  View<const std::int64_t> labels;
  View<T> dlogits;
  View<double> loss;  // (1)
  double grad_scale;
  std::int64_t k, p;         // classes, pixels per sample
  std::int64_t check_tiles;  // tiles of the label check
  std::int64_t* bad;         // check_tiles + 2 entries: per tile, then {index, label} (−1: none)
  double* terms;             // N·P loss terms
  double* partial;           // the loss reduction's partials
};

/// Label check, per tile t: the first index j ≡ t (mod tiles) with labels[j] ≥ K, or −1.
template <class T>
struct LabelCheckTileBody {
  static TESSERA_HD void run(const SoftmaxCeParams<T>& q, std::int64_t t) {
    const std::int64_t m = q.labels.numel();
    std::int64_t first = -1;
    for (std::int64_t j = t; j < m && first < 0; j += q.check_tiles)
      if (q.labels.at(j) >= q.k) first = j;
    q.bad[t] = first;
  }
};
/// Label check, one item: the smallest bad index over the tiles and its label into bad[tiles..].
template <class T>
struct LabelCheckCombineBody {
  static TESSERA_HD void run(const SoftmaxCeParams<T>& q, std::int64_t) {
    std::int64_t first = -1;
    for (std::int64_t t = 0; t < q.check_tiles; ++t)
      if (q.bad[t] >= 0 && (first < 0 || q.bad[t] < first)) first = q.bad[t];
    q.bad[q.check_tiles] = first;
    q.bad[q.check_tiles + 1] = first >= 0 ? q.labels.at(first) : -1;
  }
};

/// One pixel: its loss term and its K entries of dlogits (dlogits may alias logits).
template <class T>
struct SoftmaxCePixelBody {
  static TESSERA_HD void run(const SoftmaxCeParams<T>& q, std::int64_t item) {
    const std::int64_t n = k_div(item, q.p), px = item - n * q.p, K = q.k;
    const std::int64_t xo = n * q.logits.stride[0] + q.logits.offset_from(2, px),
                       xs = q.logits.stride[1];
    const std::int64_t label = q.labels.at(item);
    if (K == 0) {  // no classes: every label was < 0 (checked), nothing to write
      q.terms[item] = 0.0;
      return;
    }
    T mx = q.logits.data[xo];
    for (std::int64_t c = 1; c < K; ++c) {
      const T v = q.logits.data[xo + c * xs];
      mx = v > mx ? v : mx;
    }
    double sum = 0;
    for (std::int64_t c = 0; c < K; ++c) sum += double(k_exp(T(q.logits.data[xo + c * xs] - mx)));
    q.terms[item] =
        label >= 0 ? k_log(sum) - (double(q.logits.data[xo + label * xs]) - double(mx)) : 0.0;
    const T inv = label >= 0 ? T(q.grad_scale / sum) : T(0);
    const T gs = T(q.grad_scale);
    const std::int64_t o = n * q.dlogits.stride[0] + q.dlogits.offset_from(2, px),
                       os = q.dlogits.stride[1];
    for (std::int64_t c = 0; c < K; ++c) {
      T v = k_exp(T(q.logits.data[xo + c * xs] - mx)) * inv;
      if (c == label) v -= gs;
      q.dlogits.data[o + c * os] = v;
    }
  }
};

/// The loss terms as a reduction source (one row of N·P terms).
struct TermsSrc {
  const double* terms;
  TESSERA_HD void add(std::int64_t, std::int64_t, std::int64_t j, double* acc) const {
    acc[0] += terms[j];
  }
};
struct LossStore {
  View<double> loss;
  TESSERA_HD void store(std::int64_t, const double* v) const { loss.vec(0) = v[0]; }
};

/// The workspace layout of one call: the label check's words, the terms, the partials.
struct SoftmaxCeLayout {
  std::size_t bad_off = 0, terms_off = 0, partial_off = 0, total = 0;
};
template <class T>
SoftmaxCeLayout softmax_ce_layout(const SoftmaxCeParams<T>& q) {
  const std::int64_t pixels = q.logits.shape[0] * q.logits.numel_from(2);
  SoftmaxCeLayout s;
  s.terms_off = align_up(sizeof(std::int64_t) * std::size_t(tiles_of(pixels) + 2));
  s.partial_off = s.terms_off + align_up(sizeof(double) * std::size_t(pixels));
  s.total = s.partial_off + row_reduce_bytes<1>({1, 1, pixels, false});
  return s;
}
template <class T>
std::size_t workspace_bytes(const SoftmaxCeParams<T>& q) {
  return softmax_ce_layout(q).total;
}

/// The result of the label check: the first out-of-range label's row-major index and value.
struct BadLabel {
  std::int64_t index = -1, label = -1;
};

/// Runs the op. Returns the first out-of-range label (index −1: none, and the op ran through);
/// when there is one, nothing was written and the caller throws.
template <class L, class T>
BadLabel run_softmax_cross_entropy(L& l, SoftmaxCeParams<T> q) {
  const std::int64_t pixels = q.logits.shape[0] * q.logits.numel_from(2);
  q.k = q.logits.shape[1];
  q.p = q.logits.numel_from(2);
  q.check_tiles = tiles_of(pixels);
  const SoftmaxCeLayout s = softmax_ce_layout(q);
  auto* ws = static_cast<unsigned char*>(l.workspace(s.total));
  q.bad = reinterpret_cast<std::int64_t*>(ws + s.bad_off);
  q.terms = reinterpret_cast<double*>(ws + s.terms_off);
  q.partial = reinterpret_cast<double*>(ws + s.partial_off);
  l.template pass<LabelCheckTileBody<T>>(q, q.check_tiles);
  l.template pass<LabelCheckCombineBody<T>>(q, 1);
  BadLabel bad;
  l.read_back(&bad, q.bad + q.check_tiles, sizeof bad);
  if (bad.index >= 0) return bad;
  l.template pass<SoftmaxCePixelBody<T>>(q, pixels);
  run_row_reduce<1>(l, {1, 1, pixels, false}, TermsSrc{q.terms}, LossStore{q.loss}, q.partial);
  return bad;
}

}  // namespace tessera::compute::cuda::kernels
