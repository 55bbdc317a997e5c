// The spatially sharded 2-D convolution: halo exchange + local kernel, forward and backward.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/comm/backend.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/nn/halo_plan.hpp"

namespace tessera::nn {

/// What a rank's sharded ops run on. `world` may be null when the mesh has one rank.
struct RankContext {
  comm::Backend* world = nullptr;
  compute::Backend* compute = nullptr;
  core::AllocatorPtr allocator;
};

struct Conv2dOptions {
  /// Compute the outputs that read only this rank's rows while the halos are in flight, then the
  /// border strips (forward); compute the weight gradient while halo gradients are in flight
  /// (backward). Off: exchange first, then compute everything.
  bool overlap = true;
};

/// Seconds spent per phase of the last calls (wall clock on this rank).
struct Conv2dTimes {
  double exchange_s = 0;  ///< packing, posting, waiting for and unpacking halos
  double compute_s = 0;   ///< kernels
};

/// What the forward keeps for the backward: the input with its halos (plan.need).
struct Conv2dSaved {
  core::Tensor x_ext;
};

/// The halos of one forward, for halo-aware recompute: a checkpointed block's first forward keeps
/// what it received (Keep), its recompute reads them instead of exchanging again (Replay).
struct Conv2dHalos {
  enum class Use : std::uint8_t { Keep, Replay };
  Use use = Use::Keep;
  std::vector<core::Tensor> pieces;  ///< one per plan.recvs piece (MemCategory::HaloBuffer)
};

/// Forward of one rank: y_own (shape plan.out_box) = conv(x_own with halos, w) + b.
/// `b` may be null or undefined. `saved` (optional) receives what the backward needs. `halos`
/// (optional): Keep fills it with the halos received; Replay builds the input from them and
/// communicates nothing (the result is the same bits when x_own and the neighbours' inputs are).
core::Tensor conv2d_forward(const HaloPlan& plan, const RankContext& ctx, const core::Tensor& x_own,
                            const core::Tensor& w, const core::Tensor* b, Conv2dSaved* saved,
                            const Conv2dOptions& options = {}, Conv2dTimes* times = nullptr,
                            Conv2dHalos* halos = nullptr);

/// Gradients of one rank. dx is this rank's input gradient (already including the halo
/// gradients other ranks sent back); dw and db are this rank's Partial sums — reduce them over
/// plan.grad_reduce_mesh_dims (comm::MeshComm::all_reduce) before use.
struct Conv2dGrads {
  core::Tensor dx, dw, db;
};

/// Backward of one rank: `dy_own` has the shape of plan.out_box. With need_dx false the input
/// gradient (and its exchange) is skipped; with bias false db is left undefined. When
/// `dw_into` / `db_into` are given, the weight and bias gradients are added into them (a
/// module's parameter gradients) instead of being returned in new tensors; g.dw / g.db then
/// refer to them.
Conv2dGrads conv2d_backward(const HaloPlan& plan, const RankContext& ctx, const Conv2dSaved& saved,
                            const core::Tensor& w, const core::Tensor& dy_own, bool need_dx, bool bias,
                            const Conv2dOptions& options = {}, Conv2dTimes* times = nullptr,
                            core::Tensor* dw_into = nullptr, core::Tensor* db_into = nullptr);

}  // namespace tessera::nn
