// Optimizers (SGD with momentum, AdamW), the warmup + cosine learning-rate schedule and global
// gradient-norm clipping, all running their arithmetic through a compute backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/compute/backend.hpp"
#include "tessera/nn/module.hpp"

namespace tessera::nn {

struct OptimizerOptions {
  std::string kind = "adamw";  ///< "sgd" or "adamw"
  double lr = 1e-3;            ///< peak learning rate
  double weight_decay = 0.05;  ///< applied to parameters with weight_decay set
  double momentum = 0.9;       ///< sgd
  bool nesterov = false;       ///< sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  ///< adamw
};

/// Updates parameters from their (already reduced) gradients. State tensors are booked as
/// MemCategory::OptimizerState. Deterministic: the same gradients give the same bits.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// One update with learning rate `lr` (the schedule's value for this step).
  virtual void step(compute::Backend& backend, double lr) = 0;
  /// Number of completed steps (AdamW's bias correction uses it).
  virtual std::int64_t steps() const noexcept = 0;
  /// The state tensors, in a fixed order, with names ("<param>.exp_avg", ...): what a
  /// checkpoint saves and restores.
  virtual std::vector<std::pair<std::string, core::Tensor>> state() = 0;
  virtual void set_steps(std::int64_t steps) = 0;
};

/// Throws InvalidArgument for an unknown kind or an invalid value (names the option).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options, std::vector<Parameter*> params,
                                          core::AllocatorPtr allocator);

/// Linear warmup from 0 to `peak` over `warmup_steps`, then cosine decay to `final_fraction`·peak
/// at `total_steps`. `step` is 0-based.
double warmup_cosine_lr(std::int64_t step, double peak, std::int64_t warmup_steps,
                        std::int64_t total_steps, double final_fraction = 0.0);

/// The global L2 norm of the (reduced, replicated) gradients; when `max_norm` > 0 and the norm
/// exceeds it, scales every gradient by max_norm / norm. Returns the norm before clipping. A
/// non-finite norm (a NaN or ±inf gradient) is returned as is and scales nothing.
/// `reduce_sum` (optional) turns this rank's sum of squares into the global one (pipeline stages
/// each hold a part of the parameters).
double clip_grad_norm(compute::Backend& backend, const std::vector<Parameter*>& params,
                      double max_norm, const std::function<double(double)>& reduce_sum = {});

}  // namespace tessera::nn
