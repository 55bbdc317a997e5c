// GatherViews: a scene's camera views, split over the data-parallel ranks, brought together and
// stacked along channels for a fusion head that every dp rank computes alike.
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/layers.hpp"

namespace tessera::nn {

using core::MemCategory;
using core::Tensor;

core::Layout GatherViews::setup(const core::Layout& in, SetupContext& ctx) {
  TESSERA_CHECK(views_ >= 1, name(), ": ", views_, " views; a scene needs at least one");
  TESSERA_CHECK(in.ndim() == 4 && !in.has_partial(), name(), ": input ", in.to_string(),
                " should be image features (N·V,C,h,w) without Partial placements");
  const core::Shape& g = in.global_shape();
  TESSERA_CHECK(g[0] % views_ == 0, name(), ": a batch of ", g[0],
                " images is not a whole number of scenes of ", views_,
                " views; use a batch (per micro-batch) that is a multiple of ", views_);
  dp_dim_ = -1;
  std::vector<core::Placement> pl = in.placements();
  for (int d = 0; d < in.mesh().ndim(); ++d) {
    TESSERA_CHECK(!pl[std::size_t(d)].is_shard(1), name(), ": channel-sharded input ",
                  in.to_string(), " is not supported");
    if (!pl[std::size_t(d)].is_shard(0)) continue;
    TESSERA_CHECK(in.mesh().dim_name(d) == "dp", name(), ": the images are sharded over mesh dim '",
                  in.mesh().dim_name(d), "'; only \"dp\" may split a batch of views");
    const int dp = in.mesh().dim_size(d);
    // all_gather takes equal blocks: every dp rank must hold as many images.
    TESSERA_CHECK(g[0] % dp == 0, name(), ": ", g[0], " images over dp=", dp,
                  " give the ranks unequal shares; "
                  "use a batch (per micro-batch) that is a multiple of ",
                  dp, " (and of ", views_, " views)");
    pl[std::size_t(d)] = core::Replicate();
    if (dp > 1) dp_dim_ = d;
  }
  images_ = g[0];
  first_ = in.local_range(ctx.rank, 0).begin;
  const core::Layout out(in.mesh(), {g[0] / views_, views_ * g[1], g[2], g[3]}, pl,
                         {1, 1, in.align()[2], in.align()[3]});
  set_layouts(in, out);
  return out;
}

Tensor GatherViews::forward(Context& ctx, const Tensor& x) {
  ScopeGuard scope(ctx, name());
  // (n_local, C, h, w) per dp rank → (N·V, C, h, w) in dp order, i.e. in global image order.
  const Tensor mine = x.contiguous();
  Tensor all = mine;
  if (dp_dim_ >= 0) {
    TESSERA_CHECK(ctx.mesh != nullptr, name(),
                  ": the input is sharded over dp but the rank has no mesh");
    all = Tensor::empty({images_, x.size(1), x.size(2), x.size(3)}, x.dtype(),
                        MemCategory::Activation, ctx.allocator);
    ctx.mesh->dim(dp_dim_).all_gather(comm::buffer_of(mine), comm::buffer_of(all))->wait();
  }
  // Scene s's views are images s·V … s·V+V−1, consecutive in memory: stacking them along
  // channels is a reshape.
  return all.reshape({images_ / views_, views_ * x.size(1), x.size(2), x.size(3)});
}

Tensor GatherViews::backward(Context& ctx, const Tensor& dy) {
  ScopeGuard scope(ctx, name());
  // dy is the same on every dp rank (each computed the whole fusion): the adjoint of the
  // all-gather is taking this rank's block, no communication.
  const Tensor whole = dy.contiguous();
  const std::int64_t c = whole.size(1) / views_;
  const Tensor images = whole.reshape({images_, c, whole.size(2), whole.size(3)});
  if (dp_dim_ < 0) return images;
  const std::int64_t local = images_ / ctx.mesh->mesh().dim_size(dp_dim_);
  // A copy, so the whole batch's gradient is freed once the fusion head is done with it.
  return images.narrow(0, first_, local).clone();
}

}  // namespace tessera::nn
