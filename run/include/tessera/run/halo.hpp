// The halo plan of one convolution over a mesh, as data (every rank's nn::HaloPlan) and in its two
// written forms: the text `tessera halo` prints and a JSON object for tools.
#pragma once

#include <string>
#include <vector>

#include "tessera/core/layout.hpp"
#include "tessera/nn/halo_plan.hpp"

namespace tessera::run {

/// "W" → {3}, "H" → {2}, "HW" or "tiles" → {2, 3} (case-insensitive): the tensor dimensions a
/// --shard value splits. Throws InvalidArgument naming the accepted values.
std::vector<int> parse_shard_dims(const std::string& shard);

/// One depthwise convolution (the plan depends only on the geometry and the input's layout).
struct HaloRequest {
  core::Shape input{1, 1, 16, 20};  ///< N, C, H, W (C scales the element counts only)
  int kernel = 7, stride = 1;
  int pad = -1;  ///< -1: same-size, dilation·(kernel−1)/2
  int dilation = 1;
  std::string mesh = "sp=3";  ///< core::DeviceMesh::parse's form
  std::string shard = "W";    ///< parse_shard_dims's form, one mesh dimension per sharded one
  bool strict = false;        ///< refuse halos wider than a neighbour's shard
};

/// Every rank's plan of one convolution.
struct HaloReport {
  nn::ConvSpec spec;
  core::Layout in, out;
  std::vector<nn::HaloPlan> plans;  ///< by rank

  /// Halo elements every rank receives, summed.
  std::int64_t total_recv_elems() const;
  /// The text of `tessera halo`: the convolution, both layouts, each rank's plan, the total.
  std::string to_text() const;
  /// {"conv", "input", "output", "ranks": [{"rank", "own", "need", "out", "recvs": [{"peer",
  ///  "box", "elements"}], "sends": [...], "recv_elements"}], "recv_elements", "recv_bytes_fp32"}.
  std::string to_json() const;
};

/// Builds the plans of `request` for every rank. Throws InvalidArgument for a shard that does not
/// fit the mesh, a kernel wider than the input, or (strict) a wide halo.
HaloReport halo_plan(const HaloRequest& request);

}  // namespace tessera::run
