// Elementwise layers: activations, LayerScale, DropPath, nearest upsampling.
#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/core/half.hpp"
#include "tessera/nn/layers.hpp"

namespace tessera::nn {

using core::MemCategory;
using core::Tensor;

namespace {
Tensor like(const Context& ctx, const Tensor& x) {
  return Tensor::empty(x.shape(), x.dtype(), MemCategory::Activation, ctx.allocator);
}
void no_partial(const Module& m, const core::Layout& in) {
  TESSERA_CHECK(!in.has_partial(), m.name(), ": input ", in.to_string(),
                " is Partial; reduce it before an elementwise layer");
}
}  // namespace

core::Layout ActivationLayer::setup(const core::Layout& in, SetupContext&) {
  no_partial(*this, in);
  set_layouts(in, in);
  return in;
}

Tensor ActivationLayer::forward(Context& ctx, const Tensor& x) {
  ScopeGuard scope(ctx, name());
  Tensor y = like(ctx, x);
  compute::activation_forward(*ctx.compute, act_, x, y);
  if (ctx.training) saved_ = act_ == compute::Activation::Gelu ? x : y;
  return y;
}

Tensor ActivationLayer::backward(Context& ctx, const Tensor& dy) {
  ScopeGuard scope(ctx, name());
  TESSERA_CHECK(saved_.defined(), name(), ": backward without a training forward");
  Tensor dx = like(ctx, dy);
  compute::activation_backward(*ctx.compute, act_, dy, saved_, dx);
  saved_ = {};
  return dx;
}

LayerScale::LayerScale(std::string name, std::int64_t channels, double init)
    : Module(std::move(name)), channels_(channels), init_(init) {}

core::Layout LayerScale::setup(const core::Layout& in, SetupContext& ctx) {
  no_partial(*this, in);
  TESSERA_CHECK(in.ndim() >= 2 && in.global_shape()[1] == channels_, name(), ": input ", in.to_string(),
                " should have ", channels_, " channels");
  if (!gamma_) {
    gamma_ = &add_parameter(ctx, "gamma", {channels_}, Init::Ones, false);
    gamma_->value.fill(init_);
  }
  gamma_->grad_reduce_mesh_dims = sharded_mesh_dims(in);
  set_layouts(in, in);
  return in;
}

Tensor LayerScale::forward(Context& ctx, const Tensor& x) {
  ScopeGuard scope(ctx, name());
  Tensor y = like(ctx, x);
  compute::scale_channels(*ctx.compute, x, gamma_->value, y);
  if (ctx.training) x_ = x;
  return y;
}

Tensor LayerScale::backward(Context& ctx, const Tensor& dy) {
  ScopeGuard scope(ctx, name());
  TESSERA_CHECK(x_.defined(), name(), ": backward without a training forward");
  Tensor dx = like(ctx, dy);
  compute::scale_channels_backward(*ctx.compute, dy, x_, gamma_->value, &dx, gamma_->grad, true);
  x_ = {};
  return dx;
}

bool DropPath::keep(std::uint64_t seed, std::int64_t step, const std::string& layer, std::int64_t sample,
                    double prob) {
  if (prob <= 0) return true;
  std::uint64_t h = core::fnv1a64(layer, seed ^ 0x5bd1e9955bd1e995ull);
  const std::int64_t words[2] = {step, sample};
  h = core::fnv1a64(std::string_view(reinterpret_cast<const char*>(words), sizeof words), h);
  // splitmix64 finaliser for well-mixed low bits
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
  return u >= prob;
}

core::Layout DropPath::setup(const core::Layout& in, SetupContext& ctx) {
  no_partial(*this, in);
  TESSERA_CHECK(prob_ >= 0 && prob_ < 1, name(), ": drop probability ", prob_, " must be in [0, 1)");
  batch_offset_ = in.local_range(ctx.rank, 0).begin;
  set_layouts(in, in);
  return in;
}

Tensor DropPath::forward(Context& ctx, const Tensor& x) {
  ScopeGuard scope(ctx, name());
  scale_ = {};
  if (!ctx.training || prob_ <= 0) return x;
  const std::int64_t n = x.size(0);
  // The per-sample scales (0 or 1/(1-p)) in f32 under mixed precision (a Master slot of scale_samples).
  scale_ = Tensor::empty({n}, core::accumulate_dtype(x.dtype()), MemCategory::Activation, ctx.allocator);
  if (!scale_.is_meta()) {
    Tensor host = scale_.to_host();  // the per-sample scales are drawn on the host
    for (std::int64_t i = 0; i < n; ++i) {
      const double s =
          keep(ctx.seed, ctx.step, name(), ctx.sample_offset + batch_offset_ + i, prob_)
              ? 1.0 / (1.0 - prob_)
              : 0.0;
      if (scale_.dtype() == core::DType::F32) host.data<float>()[i] = static_cast<float>(s);
      else host.data<double>()[i] = s;
    }
    if (!host.shares_storage(scale_)) scale_.copy_from(host);
  }
  Tensor y = like(ctx, x);
  compute::scale_samples(*ctx.compute, x, scale_, y);
  return y;
}

Tensor DropPath::backward(Context& ctx, const Tensor& dy) {
  ScopeGuard scope(ctx, name());
  if (!scale_.defined()) return dy;
  Tensor dx = like(ctx, dy);
  compute::scale_samples(*ctx.compute, dy, scale_, dx);
  scale_ = {};
  return dx;
}

core::Layout UpsampleNearest::setup(const core::Layout& in, SetupContext& ctx) {
  no_partial(*this, in);
  TESSERA_CHECK(factor_ >= 1 && in.ndim() == 4, name(), ": needs an image input and a positive factor");
  core::Shape g = in.global_shape(), a = in.align();
  g[2] *= factor_;
  g[3] *= factor_;
  a[2] *= factor_;
  a[3] *= factor_;
  const core::Layout out(in.mesh(), g, in.placements(), a);
  // Nearest upsampling is local when every shard boundary scales exactly.
  for (int d : {2, 3})
    TESSERA_CHECK(out.local_range(ctx.rank, d).begin == in.local_range(ctx.rank, d).begin * factor_ &&
                      out.local_range(ctx.rank, d).size() == in.local_range(ctx.rank, d).size() * factor_,
                  name(), ": shards of ", in.to_string(), " do not scale to shards of ", out.to_string(),
                  " on rank ", ctx.rank, "; align the input to the model's total stride");
  set_layouts(in, out);
  return out;
}

Tensor UpsampleNearest::forward(Context& ctx, const Tensor& x) {
  ScopeGuard scope(ctx, name());
  local_in_shape_ = x.shape();
  Tensor y = Tensor::empty({x.size(0), x.size(1), x.size(2) * factor_, x.size(3) * factor_}, x.dtype(),
                           MemCategory::Activation, ctx.allocator);
  compute::upsample_nearest(*ctx.compute, x, factor_, y);
  return y;
}

Tensor UpsampleNearest::backward(Context& ctx, const Tensor& dy) {
  ScopeGuard scope(ctx, name());
  Tensor dx = Tensor::empty(local_in_shape_, dy.dtype(), MemCategory::Activation, ctx.allocator);
  compute::upsample_nearest_backward(*ctx.compute, dy, factor_, dx);
  return dx;
}

}  // namespace tessera::nn
