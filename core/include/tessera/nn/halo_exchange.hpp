// HaloExchange: carries out a HaloPlan over a communicator — the forward gather of halos and its
// exact adjoint, the backward scatter-add of halo gradients. Written once over batch_p2p.
#pragma once

#include <vector>

#include "tessera/comm/backend.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/nn/halo_plan.hpp"

namespace tessera::nn {

/// One use of a HaloPlan. Forward: start_forward() packs the slabs this rank sends, posts every
/// send and receive as one batch and returns at once; finish_forward() waits and unpacks, giving
/// the `need`-shaped buffer. Between the two, the caller may compute outputs that read only its
/// own rows (see nn::conv2d_forward). Backward mirrors it. Staging buffers are booked as
/// MemCategory::HaloBuffer on the allocator passed in.
class HaloExchange {
 public:
  /// `world` is the communicator whose ranks the plan's peers name (may be null when the plan
  /// exchanges nothing). The plan must outlive this object. With `compute`, the copies between
  /// a rank's tensor and the buffer (its own part, the received halos, the input gradient's own
  /// part) are that backend's copy kernels, so a trace times them and a simulation replays them;
  /// without, host copies (Tensor::copy_from).
  HaloExchange(const HaloPlan& plan, comm::Backend* world, core::AllocatorPtr allocator,
               compute::Backend* compute = nullptr);

  /// x_own: this rank's input (shape of plan.own). Copies it into the buffer (or views it when
  /// nothing is received), packs and posts sends and receives.
  void start_forward(const core::Tensor& x_own);
  /// The buffer (shape of plan.need); its own part is valid after start_forward, all of it after
  /// finish_forward.
  const core::Tensor& buffer() const noexcept { return buffer_; }
  /// Waits for the halos (deadline of the communicator) and unpacks them; returns buffer().
  /// With `keep`, also hands over the received halos, one per plan.recvs piece (booked as
  /// MemCategory::HaloBuffer), for replay_forward.
  const core::Tensor& finish_forward(std::vector<core::Tensor>* keep = nullptr);
  /// Instead of start_forward and finish_forward, with no communication: the buffer from x_own
  /// and the halos an earlier finish_forward of this plan kept (a checkpointed block's recompute
  /// reads the same halos its forward received). Throws InvalidArgument when `kept` does not
  /// match the plan's pieces.
  const core::Tensor& replay_forward(const core::Tensor& x_own, const std::vector<core::Tensor>& kept);

  /// dbuf: gradient w.r.t. the buffer (shape of plan.need). Packs the parts that belong to other
  /// ranks and posts them with the receives of this rank's halo gradients.
  void start_backward(const core::Tensor& dbuf);
  /// Waits and returns the gradient w.r.t. x_own: dbuf's own part plus every received gradient.
  core::Tensor finish_backward();

 private:
  core::Tensor view_of(const core::Tensor& t, const Box& t_box, const Box& sub) const;
  void own_part(const core::Tensor& x_own);
  void post(std::vector<comm::P2POp>& ops);
  void copy(const core::Tensor& from, core::Tensor to);

  const HaloPlan& plan_;
  comm::Backend* world_;
  core::AllocatorPtr alloc_;
  compute::Backend* compute_;
  core::Tensor buffer_;
  core::Tensor dbuf_;
  std::vector<core::Tensor> recv_staging_;
  std::vector<core::Tensor> send_staging_;
  comm::WorkPtr work_;
};

/// The tag halo messages use (forward; backward uses kHaloTag + 1).
inline constexpr int kHaloTag = 0x4a10;

}  // namespace tessera::nn
