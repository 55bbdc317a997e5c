// SGD with momentum, AdamW, the warmup + cosine schedule and global-norm clipping.
#include "tessera/nn/optimizer.hpp"

#include <cmath>

#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"

namespace tessera::nn {

using core::MemCategory;
using core::Tensor;

namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerOptions& o, std::vector<Parameter*> params, const core::AllocatorPtr& alloc)
      : o_(o), params_(std::move(params)) {
    for (Parameter* p : params_)
      buf_.push_back(Tensor::zeros(p->value.shape(), p->value.dtype(), MemCategory::OptimizerState, alloc));
  }
  void step(compute::Backend& b, double lr) override {
    for (std::size_t i = 0; i < params_.size(); ++i)
      compute::sgd_step(b, params_[i]->value, params_[i]->grad, buf_[i], lr, o_.momentum,
                        params_[i]->weight_decay ? o_.weight_decay : 0.0, o_.nesterov);
    ++steps_;
  }
  std::int64_t steps() const noexcept override { return steps_; }
  void set_steps(std::int64_t s) override { steps_ = s; }
  std::vector<std::pair<std::string, Tensor>> state() override {
    std::vector<std::pair<std::string, Tensor>> out;
    for (std::size_t i = 0; i < params_.size(); ++i) out.emplace_back(params_[i]->name + ".momentum", buf_[i]);
    return out;
  }

 private:
  OptimizerOptions o_;
  std::vector<Parameter*> params_;
  std::vector<Tensor> buf_;
  std::int64_t steps_ = 0;
};

class AdamW final : public Optimizer {
 public:
  AdamW(const OptimizerOptions& o, std::vector<Parameter*> params, const core::AllocatorPtr& alloc)
      : o_(o), params_(std::move(params)) {
    for (Parameter* p : params_) {
      m_.push_back(Tensor::zeros(p->value.shape(), p->value.dtype(), MemCategory::OptimizerState, alloc));
      v_.push_back(Tensor::zeros(p->value.shape(), p->value.dtype(), MemCategory::OptimizerState, alloc));
    }
  }
  void step(compute::Backend& b, double lr) override {
    ++steps_;
    for (std::size_t i = 0; i < params_.size(); ++i)
      compute::adamw_step(b, params_[i]->value, params_[i]->grad, m_[i], v_[i], lr, o_.beta1, o_.beta2, o_.eps,
                          params_[i]->weight_decay ? o_.weight_decay : 0.0, steps_);
  }
  std::int64_t steps() const noexcept override { return steps_; }
  void set_steps(std::int64_t s) override { steps_ = s; }
  std::vector<std::pair<std::string, Tensor>> state() override {
    std::vector<std::pair<std::string, Tensor>> out;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      out.emplace_back(params_[i]->name + ".exp_avg", m_[i]);
      out.emplace_back(params_[i]->name + ".exp_avg_sq", v_[i]);
    }
    return out;
  }

 private:
  OptimizerOptions o_;
  std::vector<Parameter*> params_;
  std::vector<Tensor> m_, v_;
  std::int64_t steps_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o, std::vector<Parameter*> params,
                                          core::AllocatorPtr allocator) {
  TESSERA_CHECK(o.lr >= 0, "optimizer: learning rate ", o.lr, " must not be negative");
  TESSERA_CHECK(o.weight_decay >= 0, "optimizer: weight decay ", o.weight_decay, " must not be negative");
  if (o.kind == "sgd") {
    TESSERA_CHECK(o.momentum >= 0 && o.momentum < 1, "optimizer sgd: momentum ", o.momentum, " must be in [0, 1)");
    return std::make_unique<Sgd>(o, std::move(params), allocator);
  }
  if (o.kind == "adamw") {
    TESSERA_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 && o.eps > 0,
                  "optimizer adamw: betas must be in [0, 1) and eps positive");
    return std::make_unique<AdamW>(o, std::move(params), allocator);
  }
  throw InvalidArgument("optimizer '" + o.kind + "': expected sgd or adamw");
}

double warmup_cosine_lr(std::int64_t step, double peak, std::int64_t warmup, std::int64_t total, double final_fraction) {
  if (warmup > 0 && step < warmup) return peak * double(step + 1) / double(warmup);
  const std::int64_t decay = total - warmup;
  if (decay <= 0) return peak;
  const double t = std::min(1.0, double(step - warmup) / double(decay));
  const double lo = peak * final_fraction;
  return lo + (peak - lo) * 0.5 * (1.0 + std::cos(M_PI * t));
}

double clip_grad_norm(compute::Backend& b, const std::vector<Parameter*>& params, double max_norm,
                      const std::function<double(double)>& reduce_sum) {
  double total = 0;
  // One sum of squares per parameter, booked with the gradients (in their memory: host, device or
  // meta), read back to the host at once.
  const std::int64_t n = static_cast<std::int64_t>(params.size());
  Tensor sums = Tensor::empty({n}, core::DType::F64, MemCategory::Workspace,
                              n > 0 ? params[0]->grad.allocator() : nullptr);
  bool meta = false;
  for (std::int64_t i = 0; i < n; ++i) {
    Tensor s = sums.narrow(0, i, 1);
    compute::sum_squares(b, params[i]->grad, s);
    if (params[i]->grad.is_meta()) meta = true;  // a recording run: the op is counted, no value exists
  }
  if (!meta && n > 0) {
    const Tensor host = sums.to_host();
    for (std::int64_t i = 0; i < n; ++i) total += host.data<double>()[i];
  }
  if (reduce_sum) total = reduce_sum(total);
  const double norm = std::sqrt(total);
  // A non-finite norm scales nothing (a factor of 0 or NaN would only hide which gradient blew
  // up); the caller decides what to do with the run (the trainer stops it).
  if (max_norm > 0 && (meta || (std::isfinite(norm) && norm > max_norm))) {  // a recording run counts the scaling
    const double f = max_norm / (norm + 1e-6);
    for (Parameter* p : params) {
      Tensor g = p->grad;
      compute::scale(b, f, g);
    }
  }
  return norm;
}

}  // namespace tessera::nn
