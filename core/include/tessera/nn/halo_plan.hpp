// HaloPlan: for one rank of a sharded convolution, which input it needs, and what it receives
// from and sends to whom. Derived from ConvSpec and the input/output layouts only; the runtime
// and the simulator both use it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/compute/backend.hpp"
#include "tessera/core/layout.hpp"
#include "tessera/nn/conv_spec.hpp"

namespace tessera::nn {

/// A box of global indices of an NCHW tensor.
struct Box {
  std::array<core::Range, 4> r{};
  bool empty() const noexcept;
  std::int64_t numel() const noexcept;
  core::Shape shape() const;
  Box intersect(const Box& o) const noexcept;
  bool operator==(const Box& o) const noexcept { return r == o.r; }
  /// "n[0,2) c[0,96) h[0,128) w[120,259)".
  std::string to_string() const;
};

/// One message of a halo exchange: `box` (global input indices) travels between this rank and
/// `peer` (a rank of the world communicator).
struct HaloPiece {
  int peer = -1;
  Box box;
};

struct HaloOptions {
  /// Serve a halo wider than a neighbour's shard directly from every rank that owns part of it
  /// (one message per owner: the one-hop equivalent of forwarding over several hops). When false,
  /// such a halo is refused before any communication with an InvalidArgument naming the layer,
  /// the dimension and the widths.
  bool allow_wide = true;
};

/// The halo exchange one rank performs for one sharded convolution.
///
/// Every rank holds `own` of the input; its outputs `out_box` read `need` (clipped to the global
/// input: outside it is the zero padding, which no one sends). Forward: the rank assembles a
/// buffer shaped like `need` from its own part and `recvs`, and convolves it with `local_params`.
/// Backward is the exact adjoint: the gradient of the buffer's foreign parts goes back to their
/// owners (`recvs` reversed) and the gradients of `sends` come back and are added.
struct HaloPlan {
  int rank = 0;
  ConvSpec spec;
  core::Shape in_shape;  ///< global input shape (N,C,H,W)
  Box own;
  Box need;
  Box out_box;
  std::vector<HaloPiece> recvs;  ///< ordered by peer
  std::vector<HaloPiece> sends;  ///< ordered by peer
  std::vector<int> group;        ///< ranks that may exchange halos with this one (incl. itself)
  std::vector<int> grad_reduce_mesh_dims;  ///< mesh dims over which weight gradients are Partial
  compute::Conv2dParams local_params;      ///< conv on a `need`-shaped buffer → `out_box`

  bool exchanges() const noexcept { return !recvs.empty() || !sends.empty(); }
  std::int64_t recv_elems() const noexcept;
  std::int64_t send_elems() const noexcept;
  /// Multi-line human-readable summary (for docs, tools and error messages).
  std::string describe() const;
};

/// Builds `rank`'s plan. `in` and `out` must share a mesh and placements; allowed placements are
/// Shard(0) (data parallel), Shard(2) (H), Shard(3) (W) and Replicate. Throws InvalidArgument for
/// mismatched shapes/layouts, Partial inputs and refused wide halos, Unsupported for channel
/// sharding.
HaloPlan make_halo_plan(const ConvSpec& spec, const core::Layout& in, const core::Layout& out,
                        int rank, const HaloOptions& options = {});

/// The natural output layout of a convolution: the input's placements over the output shape,
/// balanced, with the input's alignment divided by the stride where it divides (so that a chain
/// of aligned downsamplings needs no halos).
core::Layout conv_output_layout(const ConvSpec& spec, const core::Layout& in);

}  // namespace tessera::nn
