// ConvSpec and the one piece of convolution shape and halo math that runtime and simulator share.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/compute/backend.hpp"
#include "tessera/core/layout.hpp"

namespace tessera::nn {

/// Hyper-parameters of a 2-D convolution over NCHW tensors (symmetric zero padding, as in
/// PyTorch's Conv2d). Weight shape (out_channels, in_channels/groups, kernel_h, kernel_w).
struct ConvSpec {
  std::int64_t in_channels = 1;
  std::int64_t out_channels = 1;
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;
  bool bias = true;

  /// Square kernel, equal stride/padding/dilation in both dimensions.
  static ConvSpec square(std::int64_t in_channels, std::int64_t out_channels, int k, int stride = 1,
                         int pad = 0, int dilation = 1, int groups = 1, bool bias = true);
  /// Throws InvalidArgument for non-positive sizes, negative padding or channels that the groups
  /// do not divide.
  void validate() const;
  core::Shape weight_shape() const;
  /// Output shape for an (N, in_channels, H, W) input; throws InvalidArgument when the channel
  /// count differs or the (dilated) kernel is larger than the padded input.
  core::Shape output_shape(const core::Shape& input) const;
  /// Kernel parameters for the unsharded call.
  compute::Conv2dParams params() const;
  /// "conv 7x7/s1/p3 g96 96->96".
  std::string describe() const;
};

/// The geometry of one spatial dimension.
struct ConvDim {
  int kernel = 1, stride = 1, pad = 0, dilation = 1;
  /// Extent of the dilated kernel: d·(k−1)+1.
  std::int64_t span() const noexcept { return std::int64_t(dilation) * (kernel - 1) + 1; }
};
ConvDim conv_dim_h(const ConvSpec& s);
ConvDim conv_dim_w(const ConvSpec& s);

/// ⌊(in + 2p − d(k−1) − 1)/s⌋ + 1 (may be ≤ 0 when the kernel does not fit).
std::int64_t conv_output_size(std::int64_t in, const ConvDim& d);

/// The input range that outputs [a, b) read: [a·s − p, (b−1)·s − p + d·(k−1) + 1), unclipped
/// (it may reach into the zero padding below 0 or past the end). Empty for an empty output range.
core::Range conv_input_range(const core::Range& out, const ConvDim& d);

/// The outputs whose whole receptive field lies inside `available` (clipped to [0, in_size), the
/// rest being zero padding that needs no data): the interior that can be computed before halos
/// arrive. Returned as a sub-range of `out`.
core::Range conv_interior_outputs(const core::Range& out, const core::Range& available,
                                  std::int64_t in_size, const ConvDim& d);

}  // namespace tessera::nn
