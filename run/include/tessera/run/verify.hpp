// `verify conv` as a function: one convolution run sharded over in-process ranks and unsharded on
// one, with how far apart the output and every gradient are (they must agree to fp32 rounding).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/layout.hpp"
#include "tessera/nn/conv_spec.hpp"

namespace tessera::run {

/// A convolution and its sharding; the data are uniform random in [-1, 1) from `seed`.
struct VerifyConvRequest {
  int n = 2, c = 16, cout = 16, h = 37, w = 53;
  int kernel = 7, stride = 1;
  int pad = -1;  ///< -1: dilation·(kernel−1)/2
  int dilation = 1;
  int groups = 0;             ///< 0: depthwise (groups = c)
  std::string mesh = "sp=3";  ///< core::DeviceMesh::parse's form
  std::string shard = "W";    ///< parse_shard_dims's form (halo.hpp), one per mesh dimension
  unsigned seed = 1;
};

/// The sharded run beside the unsharded one.
struct VerifyConvResult {
  nn::ConvSpec spec;
  core::Shape input;
  std::string mesh;                ///< the mesh as core::DeviceMesh::to_string writes it
  std::int64_t halo_elements = 0;  ///< received by all ranks
  /// max |sharded − unsharded| / max |unsharded| of the output, input, weight and bias gradients.
  std::array<double, 4> rel_errors{};
  static constexpr std::array<const char*, 4> kNames = {"output", "input gradient",
                                                        "weight gradient", "bias gradient"};
  /// Every error at most `tolerance` (fp32 rounding of a sum taken in another order).
  bool agree(double tolerance = 1e-5) const;
};

/// Runs the convolution forward and backward, sharded (its weight gradients all-reduced, output
/// and input gradient gathered) and on one rank, on the cpu backend. Throws InvalidArgument for
/// a sharding that does not fit the mesh or a convolution that does not fit the input.
VerifyConvResult verify_conv(const VerifyConvRequest& request);

}  // namespace tessera::run
