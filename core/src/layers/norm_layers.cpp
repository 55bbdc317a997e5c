// LayerNorm (per pixel over channels) and BatchNorm (SyncBN across every sharded mesh dim).
#include <cmath>

#include "tessera/core/error.hpp"
#include "tessera/core/half.hpp"
#include "tessera/nn/layers.hpp"

namespace tessera::nn {

using core::MemCategory;
using core::Tensor;

namespace {
core::Shape without_dim1(const core::Shape& s) {
  core::Shape r;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (i != 1) r.push_back(s[i]);
  return r;
}
}  // namespace

LayerNorm::LayerNorm(std::string name, std::int64_t channels, double eps)
    : Module(std::move(name)), channels_(channels), eps_(eps) {}

core::Layout LayerNorm::setup(const core::Layout& in, SetupContext& ctx) {
  TESSERA_CHECK(in.ndim() >= 2 && in.global_shape()[1] == channels_, name(), ": input ", in.to_string(),
                " should have ", channels_, " channels in dimension 1");
  for (int d = 0; d < in.mesh().ndim(); ++d)
    TESSERA_CHECK(!in.placement(d).is_shard(1) && !in.placement(d).is_partial(), name(),
                  ": LayerNorm needs whole channels and summed values; got ", in.to_string());
  if (!gamma_) {
    gamma_ = &add_parameter(ctx, "weight", {channels_}, Init::Ones, false);
    beta_ = &add_parameter(ctx, "bias", {channels_}, Init::Zeros, false);
  }
  gamma_->grad_reduce_mesh_dims = beta_->grad_reduce_mesh_dims = sharded_mesh_dims(in);
  set_layouts(in, in);
  return in;
}

Tensor LayerNorm::forward(Context& ctx, const Tensor& x) {
  ScopeGuard scope(ctx, name());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), MemCategory::Activation, ctx.allocator);
  // Statistics in f32 when x is stored in 16 bits (mixed precision), else in x's dtype.
  const core::DType sd = core::accumulate_dtype(x.dtype());
  Tensor mean = Tensor::empty(without_dim1(x.shape()), sd, MemCategory::Activation, ctx.allocator);
  Tensor rstd = Tensor::empty(mean.shape(), sd, MemCategory::Activation, ctx.allocator);
  compute::layernorm_forward(*ctx.compute, x, gamma_->value, beta_->value, eps_, y, mean, rstd);
  if (ctx.training) {
    x_ = x;
    mean_ = mean;
    rstd_ = rstd;
  }
  return y;
}

Tensor LayerNorm::backward(Context& ctx, const Tensor& dy) {
  ScopeGuard scope(ctx, name());
  TESSERA_CHECK(x_.defined(), name(), ": backward without a training forward");
  Tensor dx = Tensor::empty(x_.shape(), x_.dtype(), MemCategory::Activation, ctx.allocator);
  compute::layernorm_backward(*ctx.compute, dy, x_, gamma_->value, mean_, rstd_, dx, gamma_->grad,
                              beta_->grad, true);
  release_saved();
  return dx;
}

BatchNorm::BatchNorm(std::string name, std::int64_t channels, double eps, double momentum, bool zero_gamma)
    : Module(std::move(name)), channels_(channels), eps_(eps), momentum_(momentum), zero_gamma_(zero_gamma) {}

core::Layout BatchNorm::setup(const core::Layout& in, SetupContext& ctx) {
  TESSERA_CHECK(in.ndim() == 4 && in.global_shape()[1] == channels_, name(), ": input ", in.to_string(),
                " should be (N,", channels_, ",H,W)");
  for (int d = 0; d < in.mesh().ndim(); ++d)
    TESSERA_CHECK(!in.placement(d).is_shard(1) && !in.placement(d).is_partial(), name(),
                  ": BatchNorm needs whole channels and summed values; got ", in.to_string());
  if (!gamma_) {
    gamma_ = &add_parameter(ctx, "weight", {channels_}, zero_gamma_ ? Init::Zeros : Init::Ones, false);
    beta_ = &add_parameter(ctx, "bias", {channels_}, Init::Zeros, false);
    running_mean_ = Tensor::zeros({channels_}, ctx.dtype, MemCategory::Parameter, ctx.allocator);
    running_var_ = Tensor::empty({channels_}, ctx.dtype, MemCategory::Parameter, ctx.allocator);
    running_var_.fill(1.0);
  }
  reduce_dims_ = sharded_mesh_dims(in);
  gamma_->grad_reduce_mesh_dims = beta_->grad_reduce_mesh_dims = reduce_dims_;
  const auto& g = in.global_shape();
  count_ = double(g[0]) * double(g[2]) * double(g[3]);
  set_layouts(in, in);
  return in;
}

void BatchNorm::buffers(std::vector<std::pair<std::string, core::Tensor*>>& out) {
  out.emplace_back(name() + ".running_mean", &running_mean_);
  out.emplace_back(name() + ".running_var", &running_var_);
}

namespace {

/// Host access to a small tensor in any memory: the tensor itself on the host, else a host copy
/// that store() writes back (per-channel statistics are computed on the host).
class HostMirror {
 public:
  explicit HostMirror(Tensor& t) : t_(t), h_(t.to_host()) {}
  template <class T>
  T* data() { return h_.data<T>(); }
  void store() {
    if (!h_.shares_storage(t_)) t_.copy_from(h_);
  }

 private:
  Tensor& t_;
  Tensor h_;
};

// mean and rstd (f32 or f64: the statistics' dtype) from global f64 sums; also returns the unbiased variance.
void stats_from_sums(const Tensor& sum_in, const Tensor& sumsq_in, double count, double eps, Tensor& mean_out,
                     Tensor& rstd_out, std::vector<double>& var_unbiased) {
  const std::int64_t c = sum_in.numel();
  var_unbiased.assign(c, 0.0);
  if (sum_in.is_meta()) return;
  const Tensor sum = sum_in.to_host(), sumsq = sumsq_in.to_host();
  HostMirror mean(mean_out), rstd(rstd_out);
  const double* s = sum.data<double>();
  const double* q = sumsq.data<double>();
  for (std::int64_t i = 0; i < c; ++i) {
    const double m = s[i] / count;
    const double var = std::max(0.0, q[i] / count - m * m);
    var_unbiased[i] = count > 1 ? var * count / (count - 1) : var;
    const double r = 1.0 / std::sqrt(var + eps);
    if (mean_out.dtype() == core::DType::F32) {
      mean.data<float>()[i] = static_cast<float>(m);
      rstd.data<float>()[i] = static_cast<float>(r);
    } else {
      mean.data<double>()[i] = m;
      rstd.data<double>()[i] = r;
    }
  }
  mean.store();
  rstd.store();
}

}  // namespace

Tensor BatchNorm::forward(Context& ctx, const Tensor& x) {
  ScopeGuard scope(ctx, name());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), MemCategory::Activation, ctx.allocator);
  if (!ctx.training) {
    // Running statistics have the parameters' dtype (f32 under mixed precision, like rstd).
    Tensor rstd = Tensor::empty({channels_}, running_var_.dtype(), MemCategory::Workspace, ctx.allocator);
    if (!rstd.is_meta()) {
      HostMirror var(running_var_), r(rstd);
      const bool f32 = running_var_.dtype() == core::DType::F32;
      for (std::int64_t i = 0; i < channels_; ++i) {
        const double v = f32 ? var.data<float>()[i] : var.data<double>()[i];
        if (f32) r.data<float>()[i] = float(1.0 / std::sqrt(v + eps_));
        else r.data<double>()[i] = 1.0 / std::sqrt(v + eps_);
      }
      r.store();
    }
    compute::batchnorm_forward(*ctx.compute, x, running_mean_, rstd, gamma_->value, beta_->value, y);
    return y;
  }
  Tensor sum = Tensor::empty({channels_}, core::DType::F64, MemCategory::Workspace, ctx.allocator);
  Tensor sumsq = Tensor::empty({channels_}, core::DType::F64, MemCategory::Workspace, ctx.allocator);
  compute::channel_moments(*ctx.compute, x, sum, sumsq);
  if (ctx.mesh && !reduce_dims_.empty()) {
    ctx.mesh->all_reduce(sum, reduce_dims_);
    ctx.mesh->all_reduce(sumsq, reduce_dims_);
  }
  // Statistics in f32 when x is stored in 16 bits (mixed precision), else in x's dtype.
  const core::DType sd = core::accumulate_dtype(x.dtype());
  mean_ = Tensor::empty({channels_}, sd, MemCategory::Activation, ctx.allocator);
  rstd_ = Tensor::empty({channels_}, sd, MemCategory::Activation, ctx.allocator);
  std::vector<double> var_unbiased;
  stats_from_sums(sum, sumsq, count_, eps_, mean_, rstd_, var_unbiased);
  if (!ctx.recomputing && !running_mean_.is_meta()) {
    const Tensor hsum = sum.to_host();
    HostMirror mean(running_mean_), var(running_var_);
    for (std::int64_t i = 0; i < channels_; ++i) {
      const double m = hsum.data<double>()[i] / count_;
      if (running_mean_.dtype() == core::DType::F32) {
        float& rm = mean.data<float>()[i];
        float& rv = var.data<float>()[i];
        rm = float((1 - momentum_) * rm + momentum_ * m);
        rv = float((1 - momentum_) * rv + momentum_ * var_unbiased[i]);
      } else {
        double& rm = mean.data<double>()[i];
        double& rv = var.data<double>()[i];
        rm = (1 - momentum_) * rm + momentum_ * m;
        rv = (1 - momentum_) * rv + momentum_ * var_unbiased[i];
      }
    }
    mean.store();
    var.store();
  }
  compute::batchnorm_forward(*ctx.compute, x, mean_, rstd_, gamma_->value, beta_->value, y);
  x_ = x;
  return y;
}

Tensor BatchNorm::backward(Context& ctx, const Tensor& dy) {
  ScopeGuard scope(ctx, name());
  TESSERA_CHECK(x_.defined(), name(), ": backward without a training forward");
  Tensor sum_dy = Tensor::empty({channels_}, core::DType::F64, MemCategory::Workspace, ctx.allocator);
  Tensor sum_dy_xhat = Tensor::empty({channels_}, core::DType::F64, MemCategory::Workspace, ctx.allocator);
  compute::batchnorm_backward_reduce(*ctx.compute, dy, x_, mean_, rstd_, sum_dy, sum_dy_xhat);
  // Parameter gradients are this rank's Partial sums: dgamma = Σ dy·x̂, dbeta = Σ dy.
  if (!sum_dy.is_meta()) {
    const Tensor sdx = sum_dy_xhat.to_host(), sd = sum_dy.to_host();
    HostMirror dgamma(gamma_->grad), dbeta(beta_->grad);
    for (std::int64_t i = 0; i < channels_; ++i) {
      if (gamma_->grad.dtype() == core::DType::F32) {
        dgamma.data<float>()[i] += float(sdx.data<double>()[i]);
        dbeta.data<float>()[i] += float(sd.data<double>()[i]);
      } else {
        dgamma.data<double>()[i] += sdx.data<double>()[i];
        dbeta.data<double>()[i] += sd.data<double>()[i];
      }
    }
    dgamma.store();
    dbeta.store();
  }
  if (ctx.mesh && !reduce_dims_.empty()) {
    ctx.mesh->all_reduce(sum_dy, reduce_dims_);
    ctx.mesh->all_reduce(sum_dy_xhat, reduce_dims_);
  }
  Tensor dx;
  if (input_grad()) {
    dx = Tensor::empty(x_.shape(), x_.dtype(), MemCategory::Activation, ctx.allocator);
    compute::batchnorm_backward_data(*ctx.compute, dy, x_, mean_, rstd_, gamma_->value, sum_dy, sum_dy_xhat,
                                     count_, dx);
  }
  release_saved();
  return dx;
}

}  // namespace tessera::nn
