// Conv2d module: a sharded convolution whose weight gradients accumulate into its parameters.
#include "tessera/core/error.hpp"
#include "tessera/nn/layers.hpp"

namespace tessera::nn {

Conv2d::Conv2d(std::string name, ConvSpec spec, ConvInit init)
    : Module(std::move(name)), spec_(spec), init_(init) {
  spec_.validate();
}

core::Layout Conv2d::setup(const core::Layout& in, SetupContext& ctx) {
  TESSERA_CHECK(in.ndim() == 4, name(), " (", spec_.describe(), "): input layout ", in.to_string(),
                " is not an image (N,C,H,W)");
  const core::Layout out = conv_output_layout(spec_, in);
  plan_ = make_halo_plan(spec_, in, out, ctx.rank, ctx.halo);
  if (!weight_) {
    const double fan_out = double(spec_.out_channels) * spec_.kernel_h * spec_.kernel_w / spec_.groups;
    weight_ = &add_parameter(ctx, "weight", spec_.weight_shape(),
                             init_ == ConvInit::TruncNormal ? Init::TruncNormal002 : Init::KaimingFanOut,
                             true, fan_out);
    if (spec_.bias) bias_ = &add_parameter(ctx, "bias", {spec_.out_channels}, Init::Zeros, false);
  }
  const auto dims = sharded_mesh_dims(in);
  weight_->grad_reduce_mesh_dims = dims;
  if (bias_) bias_->grad_reduce_mesh_dims = dims;
  set_layouts(in, out);
  return out;
}

core::Tensor Conv2d::forward(Context& ctx, const core::Tensor& x) {
  ScopeGuard scope(ctx, name());
  TESSERA_CHECK(plan_.has_value(), name(), ": forward before setup");
  // Halo-aware recompute: every rank takes the same branch (the flags are the same everywhere),
  // so a rank never exchanges with a neighbour that replays.
  Conv2dHalos* halos = nullptr;
  const bool keep = ctx.training && ctx.checkpointed && ctx.halo_recompute == HaloRecompute::Keep;
  if (ctx.recomputing && have_kept_) {
    kept_.use = Conv2dHalos::Use::Replay;
    halos = &kept_;
  } else {
    kept_ = {};
    have_kept_ = keep;
    if (keep) halos = &kept_;  // Use::Keep
  }
  core::Tensor y = conv2d_forward(*plan_, ctx.rank_context(), x, weight_->value, bias_ ? &bias_->value : nullptr,
                            ctx.training ? &saved_ : nullptr, ctx.conv, nullptr, halos);
  if (halos && halos->use == Conv2dHalos::Use::Replay && !keep) {  // consumed (kept on in a nested forward)
    kept_ = {};
    have_kept_ = false;
  }
  return y;
}

core::Tensor Conv2d::backward(Context& ctx, const core::Tensor& dy) {
  ScopeGuard scope(ctx, name());
  TESSERA_CHECK(saved_.x_ext.defined(), name(), ": backward without a training forward");
  Conv2dGrads g = conv2d_backward(*plan_, ctx.rank_context(), saved_, weight_->value, dy, input_grad(),
                                  bias_ != nullptr, ctx.conv, nullptr, &weight_->grad,
                                  bias_ ? &bias_->grad : nullptr);
  saved_ = {};
  return g.dx;
}

}  // namespace tessera::nn
