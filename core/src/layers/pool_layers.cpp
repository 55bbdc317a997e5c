// Global average pooling (a Partial sum over the spatial shards), Linear, squeeze-and-excitation.
#include "tessera/core/error.hpp"
#include "tessera/core/half.hpp"
#include "tessera/nn/layers.hpp"

namespace tessera::nn {

using core::MemCategory;
using core::Tensor;

core::Layout GlobalAvgPool::setup(const core::Layout& in, SetupContext&) {
  TESSERA_CHECK(in.ndim() == 4 && !in.has_partial(), name(), ": input ", in.to_string(),
                " should be an image (N,C,H,W) without Partial placements");
  spatial_dims_ = spatial_mesh_dims(in);
  std::vector<core::Placement> pl = in.placements();
  for (auto& p : pl) {
    TESSERA_CHECK(!p.is_shard(1), name(), ": channel-sharded input ", in.to_string(), " is not supported");
    if (p.is_shard(2) || p.is_shard(3)) p = core::Replicate();
  }
  const auto& g = in.global_shape();
  hw_ = double(g[2]) * double(g[3]);
  const core::Layout out(in.mesh(), {g[0], g[1]}, pl, {in.align()[0], 1});
  set_layouts(in, out);
  return out;
}

Tensor GlobalAvgPool::forward(Context& ctx, const Tensor& x) {
  ScopeGuard scope(ctx, name());
  local_in_shape_ = x.shape();
  in_dtype_ = x.dtype();
  // A reduction: in f32 under mixed precision (as autocast sums), so the Partial sums that cross
  // ranks are not rounded to 16 bits, and what follows (the head, SE's FC layers) runs in f32.
  Tensor y = Tensor::empty({x.size(0), x.size(1)}, core::accumulate_dtype(x.dtype()), MemCategory::Activation,
                           ctx.allocator);
  compute::channel_sum(*ctx.compute, x, y);
  compute::scale(*ctx.compute, 1.0 / hw_, y);
  if (ctx.mesh && !spatial_dims_.empty()) ctx.mesh->all_reduce(y, spatial_dims_);  // Partial → Replicate
  return y;
}

Tensor GlobalAvgPool::backward(Context& ctx, const Tensor& dy) {
  ScopeGuard scope(ctx, name());
  // The adjoint of the all-reduce (P → R) is the identity: every rank already holds dL/dy.
  Tensor dx = Tensor::empty(local_in_shape_, in_dtype_, MemCategory::Activation, ctx.allocator);
  compute::channel_broadcast(*ctx.compute, dy, 1.0 / hw_, dx);
  return dx;
}

Linear::Linear(std::string name, std::int64_t in, std::int64_t out, bool bias, bool trunc_normal_init)
    : Module(std::move(name)), in_(in), out_(out), bias_on_(bias), trunc_normal_(trunc_normal_init) {}

core::Layout Linear::setup(const core::Layout& in, SetupContext& ctx) {
  TESSERA_CHECK(in.ndim() == 2 && in.global_shape()[1] == in_ && !in.has_partial(), name(), ": input ",
                in.to_string(), " should be (N,", in_, ") without Partial placements");
  for (int d = 0; d < in.mesh().ndim(); ++d)
    TESSERA_CHECK(!in.placement(d).is_shard(1), name(), ": feature-sharded input is not supported");
  if (!weight_) {
    weight_ = &add_parameter(ctx, "weight", {out_, in_}, trunc_normal_ ? Init::TruncNormal002 : Init::Uniform,
                             true, double(in_));
    if (bias_on_) bias_ = &add_parameter(ctx, "bias", {out_}, Init::Zeros, false);
  }
  weight_->grad_reduce_mesh_dims = sharded_mesh_dims(in);
  if (bias_) bias_->grad_reduce_mesh_dims = weight_->grad_reduce_mesh_dims;
  const core::Layout out(in.mesh(), {in.global_shape()[0], out_}, in.placements(), {in.align()[0], 1});
  set_layouts(in, out);
  return out;
}

Tensor Linear::forward(Context& ctx, const Tensor& x) {
  ScopeGuard scope(ctx, name());
  Tensor y = Tensor::empty({x.size(0), out_}, x.dtype(), MemCategory::Activation, ctx.allocator);
  compute::linear_forward(*ctx.compute, x, weight_->value, bias_ ? &bias_->value : nullptr, y);
  if (ctx.training) x_ = x;
  return y;
}

Tensor Linear::backward(Context& ctx, const Tensor& dy) {
  ScopeGuard scope(ctx, name());
  TESSERA_CHECK(x_.defined(), name(), ": backward without a training forward");
  Tensor dx;
  if (input_grad()) dx = Tensor::empty(x_.shape(), x_.dtype(), MemCategory::Activation, ctx.allocator);
  compute::linear_backward(*ctx.compute, dy, x_, weight_->value, input_grad() ? &dx : nullptr, weight_->grad,
                           bias_ ? &bias_->grad : nullptr, true);
  x_ = {};
  return dx;
}

SqueezeExcite::SqueezeExcite(std::string name, std::int64_t channels, std::int64_t squeeze)
    : Module(name), pool_(name + ".pool"), fc_(name) {
  fc_.add(std::make_unique<Linear>(name + ".fc1", channels, squeeze, true, false));
  fc_.add(std::make_unique<ActivationLayer>(name + ".relu", compute::Activation::Relu));
  fc_.add(std::make_unique<Linear>(name + ".fc2", squeeze, channels, true, false));
  fc_.add(std::make_unique<ActivationLayer>(name + ".sigmoid", compute::Activation::Sigmoid));
}

core::Layout SqueezeExcite::setup(const core::Layout& in, SetupContext& ctx) {
  spatial_dims_ = spatial_mesh_dims(in);
  const core::Layout pooled = pool_.setup(in, ctx);
  fc_.setup(pooled, ctx);
  set_layouts(in, in);
  return in;
}

Tensor SqueezeExcite::forward(Context& ctx, const Tensor& x) {
  ScopeGuard scope(ctx, name());
  const Tensor pooled = pool_.forward(ctx, x);
  Tensor s = fc_.forward(ctx, pooled);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), MemCategory::Activation, ctx.allocator);
  compute::scale_channels(*ctx.compute, x, s, y);
  if (ctx.training) {
    x_ = x;
    s_ = s;
  }
  return y;
}

Tensor SqueezeExcite::backward(Context& ctx, const Tensor& dy) {
  ScopeGuard scope(ctx, name());
  TESSERA_CHECK(x_.defined(), name(), ": backward without a training forward");
  Tensor dx = Tensor::empty(x_.shape(), x_.dtype(), MemCategory::Activation, ctx.allocator);
  Tensor ds = Tensor::empty(s_.shape(), s_.dtype(), MemCategory::Activation, ctx.allocator);
  compute::scale_channels_backward(*ctx.compute, dy, x_, s_, &dx, ds, false);
  // ds is this rank's Partial sum over its pixels; the layers that made s are replicated.
  if (ctx.mesh && !spatial_dims_.empty()) ctx.mesh->all_reduce(ds, spatial_dims_);
  const Tensor dpooled = fc_.backward(ctx, ds);
  const Tensor dx_pool = pool_.backward(ctx, dpooled);
  compute::axpy(*ctx.compute, 1.0, dx_pool, dx);
  x_ = s_ = {};
  return dx;
}

void SqueezeExcite::parameters(std::vector<Parameter*>& out) { fc_.parameters(out); }

void SqueezeExcite::children(std::vector<Module*>& out) {
  out.push_back(&pool_);
  out.push_back(&fc_);
}

void SqueezeExcite::release_saved() {
  x_ = s_ = {};
  fc_.release_saved();
}

}  // namespace tessera::nn
