// Depthwise k×k convolution (groups == Cin == Cout): row-vectorised kernels, tiled over rows.
#pragma once

#include "conv_common.hpp"

namespace tessera::compute::cpu {

/// True when the depthwise kernels apply: groups == Cin == Cout (any k, stride, dilation, pad).
bool depthwise_applies(const Conv2dParams& p, const ConvDims& d);

/// y (N,C,Ho,Wo) = depthwise conv of x (N,C,H,W) with w (C,1,kh,kw) + bias (may be null).
/// Tasks are (plane, block of output rows); each copies its input rows zero-padded (and split
/// into stride phases) into per-worker scratch, then sums kh·kw shifted rows per output row.
/// S is the activations' storage (float, double, or std::uint16_t for bf16/f16, ConvContext::half):
/// 16-bit rows are widened as they are buffered and each output row is computed in f32 and rounded
/// once, which gives the bits of the f32 kernel on widened tensors. Weights are compute_t<S>.
template <class S>
void depthwise_forward(const ConvContext& c, PlaneView<const S> x, const compute_t<S>* w,
                       const compute_t<S>* bias, PlaneView<S> y);

/// dx (N,C,H,W) (+)= adjoint in x: per dx row, a gather over the dy rows and taps that reach it
/// (one gather per stride phase of W), so every dx element is written by one task.
template <class S>
void depthwise_backward_data(const ConvContext& c, PlaneView<const S> dy, const compute_t<S>* w,
                             PlaneView<S> dx, bool accumulate);

/// dw (C,1,kh,kw) (+)= Σ x·dy and db (C) (+)= Σ dy (db may be null); dw and db contiguous.
/// One task per channel sums over n and rows in a fixed order (deterministic for any threads).
template <class S>
void depthwise_backward_weight(const ConvContext& c, PlaneView<const S> x, PlaneView<const S> dy,
                               compute_t<S>* dw, compute_t<S>* db, bool accumulate);

namespace detail {

/// Layout of zero-padded input rows split into stride phases: phase r of a row holds
/// xpad[m·sw + r] for m in [0, phase_len), where xpad[col] = x[col − pad_w] (0 outside [0, W)).
struct PhaseRows {
  int sw = 1, pad_w = 0, phase_len = 0;
  int row_len() const { return sw * phase_len; }
  /// Start of the tap at column offset `off` = j·dilation_w within a buffered row.
  template <class T>
  const T* tap(const T* row, int off) const {
    return row + (off % sw) * phase_len + off / sw;
  }
};

/// PhaseRows covering output columns [0, wo) plus one vector of slack.
PhaseRows phase_rows(const Conv2dParams& p, int wo, int lanes);

/// Writes one x row (w elements) into `dst` (row_len() elements) in the PhaseRows layout.
template <class T>
void fill_phase_row(const PhaseRows& pr, const T* src, int w, T* dst);

}  // namespace detail

}  // namespace tessera::compute::cpu
