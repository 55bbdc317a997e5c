// Residual connections and activation checkpointing.
#include "tessera/core/error.hpp"
#include "tessera/nn/layers.hpp"

namespace tessera::nn {

using core::MemCategory;
using core::Tensor;

Residual::Residual(std::string name, ModulePtr body, ModulePtr shortcut, bool post_relu)
    : Module(std::move(name)), body_(std::move(body)), shortcut_(std::move(shortcut)), post_relu_(post_relu) {}

core::Layout Residual::setup(const core::Layout& in, SetupContext& ctx) {
  const core::Layout a = body_->setup(in, ctx);
  const core::Layout b = shortcut_ ? shortcut_->setup(in, ctx) : in;
  TESSERA_CHECK(a.global_shape() == b.global_shape() && a.placements() == b.placements(), name(),
                ": the body gives ", a.to_string(), " but the shortcut ", b.to_string(),
                "; a residual sum needs equal layouts");
  set_layouts(in, a);
  return a;
}

Tensor Residual::forward(Context& ctx, const Tensor& x) {
  const Tensor a = body_->forward(ctx, x);
  const Tensor b = shortcut_ ? shortcut_->forward(ctx, x) : x;
  ScopeGuard scope(ctx, name());
  Tensor y = Tensor::empty(a.shape(), a.dtype(), MemCategory::Activation, ctx.allocator);
  compute::add(*ctx.compute, a, b, y);
  if (post_relu_) {
    compute::activation_forward(*ctx.compute, compute::Activation::Relu, y, y);
    if (ctx.training) y_ = y;
  }
  return y;
}

Tensor Residual::backward(Context& ctx, const Tensor& dy) {
  Tensor g = dy;
  if (post_relu_) {
    ScopeGuard scope(ctx, name());
    TESSERA_CHECK(y_.defined(), name(), ": backward without a training forward");
    g = Tensor::empty(dy.shape(), dy.dtype(), MemCategory::Activation, ctx.allocator);
    compute::activation_backward(*ctx.compute, compute::Activation::Relu, dy, y_, g);
    y_ = {};
  }
  Tensor dx = body_->backward(ctx, g);
  if (!input_grad()) {
    if (shortcut_) shortcut_->backward(ctx, g);
    return dx;
  }
  ScopeGuard scope(ctx, name());
  const Tensor ds = shortcut_ ? shortcut_->backward(ctx, g) : g;
  if (dx.shares_storage(dy) || dx.shares_storage(g)) dx = dx.clone(MemCategory::Activation);
  compute::axpy(*ctx.compute, 1.0, ds, dx);
  return dx;
}

void Residual::parameters(std::vector<Parameter*>& out) {
  body_->parameters(out);
  if (shortcut_) shortcut_->parameters(out);
}

void Residual::children(std::vector<Module*>& out) {
  out.push_back(body_.get());
  if (shortcut_) out.push_back(shortcut_.get());
}

void Residual::release_saved() {
  y_ = {};
  body_->release_saved();
  if (shortcut_) shortcut_->release_saved();
}

Checkpoint::Checkpoint(ModulePtr inner) : Module(inner->name()), inner_(std::move(inner)) {}

core::Layout Checkpoint::setup(const core::Layout& in, SetupContext& ctx) {
  const core::Layout out = inner_->setup(in, ctx);
  set_layouts(in, out);
  return out;
}

Tensor Checkpoint::forward(Context& ctx, const Tensor& x) {
  const bool was_checkpointed = ctx.checkpointed;
  ctx.checkpointed = ctx.training;  // convolutions keep their halos for the recompute (Conv2d)
  Tensor y;
  try {
    y = inner_->forward(ctx, x);
  } catch (...) {
    ctx.checkpointed = was_checkpointed;
    throw;
  }
  ctx.checkpointed = was_checkpointed;
  if (ctx.training) {
    inner_->release_saved();
    x_ = x;
  }
  return y;
}

Tensor Checkpoint::backward(Context& ctx, const Tensor& dy) {
  TESSERA_CHECK(x_.defined(), name(), ": backward without a training forward");
  const bool was = ctx.recomputing, was_checkpointed = ctx.checkpointed;
  ctx.recomputing = true;
  ctx.checkpointed = false;  // what the recompute saves, backward uses at once
  try {
    inner_->forward(ctx, x_);  // recompute what backward needs (same seed and step: same DropPath)
  } catch (...) {
    ctx.recomputing = was;
    ctx.checkpointed = was_checkpointed;
    throw;
  }
  ctx.recomputing = was;
  ctx.checkpointed = was_checkpointed;
  x_ = {};
  return inner_->backward(ctx, dy);
}

void Checkpoint::parameters(std::vector<Parameter*>& out) { inner_->parameters(out); }
void Checkpoint::children(std::vector<Module*>& out) { out.push_back(inner_.get()); }
void Checkpoint::release_saved() {
  x_ = {};
  inner_->release_saved();
}

}  // namespace tessera::nn
