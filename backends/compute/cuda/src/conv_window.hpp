// How a convolution call's output window (y's extent, pad saying where output 0 sits; see
// compute::Conv2dParams) maps onto cuDNN, whose legacy API takes one symmetric padding per dim
// and derives the output extent from the input's. Plain arithmetic, no CUDA.
#pragma once

#include <cstdint>

namespace tessera::compute::cuda {

/// One spatial dimension of a call as cuDNN sees it: input rows [first, first + rows) of the
/// caller's tensor with symmetric padding `pad`; cuDNN's output extent is then exactly the
/// caller's and every row it reads as padding is a true zero of the call.
struct ConvDimPlan {
  bool direct = false;     ///< false: needs an explicit zero-padded frame (see frame_*)
  std::int64_t first = 0;  ///< offset of the first input row given to cuDNN
  std::int64_t rows = 0;   ///< input rows given to cuDNN
  int pad = 0;             ///< cuDNN's symmetric padding
  /// The frame (when !direct): input rows [frame_lo, frame_lo + frame_rows) of the caller's frame
  /// (rows outside [0, in) are zeros), given to cuDNN with pad 0.
  std::int64_t frame_lo = 0;
  std::int64_t frame_rows = 0;
};

/// cuDNN's output extent for `in` rows: (in + 2·pad − dilation·(kernel−1) − 1) / stride + 1.
constexpr std::int64_t cudnn_out_extent(std::int64_t in, int kernel, int stride, int pad,
                                        int dilation) {
  const std::int64_t span = in + 2 * static_cast<std::int64_t>(pad) -
                            static_cast<std::int64_t>(dilation) * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

/// The plan of one dimension: input extent `in`, output extent `out` (> 0), the call's kernel,
/// stride, pad (any sign) and dilation.
constexpr ConvDimPlan plan_conv_dim(std::int64_t in, std::int64_t out, int kernel, int stride,
                                    int pad, int dilation) {
  ConvDimPlan p;
  const std::int64_t span =
      static_cast<std::int64_t>(dilation) * (kernel - 1) + 1;  // rows one output reads
  // Exclusive end of the rows the last output reads, for a cuDNN padding `q` on rows from `first`.
  const auto need_end = [&](int q) { return (out - 1) * stride - q + span; };
  p.frame_lo = -static_cast<std::int64_t>(pad);
  p.frame_rows = (out - 1) * stride + span;
  if (pad >= 0) {
    // The standard case: the whole input, cuDNN's padding, cuDNN's extent equal to the call's.
    if (cudnn_out_extent(in, kernel, stride, pad, dilation) == out) {
      p.direct = true, p.first = 0, p.rows = in, p.pad = pad;
      return p;
    }
    // A window ending inside the input: cut the input after the last row read; the bottom padding
    // cuDNN adds then yields no extra output only when pad < stride.
    if (pad < stride && need_end(pad) <= in && need_end(pad) > 0) {
      p.direct = true, p.first = 0, p.rows = need_end(pad), p.pad = pad;
      return p;
    }
    return p;
  }
  // A window starting inside the input (negative pad): start the input there, no padding.
  const std::int64_t first = -static_cast<std::int64_t>(pad);
  if (need_end(0) <= in - first) {
    p.direct = true, p.first = first, p.rows = need_end(0), p.pad = 0;
    return p;
  }
  return p;
}

}  // namespace tessera::compute::cuda
