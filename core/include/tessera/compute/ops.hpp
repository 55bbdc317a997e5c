// The kernels a compute backend provides, as one enum of operations plus typed functions that
// check their arguments and hand an OpCall to Backend::execute. One choke point keeps decorators
// (tracing, the simulator's recorder) small and gives every op one cost formula (op_cost).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "tessera/compute/backend.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::compute {

enum class Activation : std::uint8_t { Relu, Gelu, Sigmoid };
std::string_view activation_name(Activation a) noexcept;

/// Every kernel. Shapes use NCHW for images, (M,K) for matrices.
enum class OpKind : std::uint8_t {
  Conv2dForward,         ///< in: x, w, [bias]          out: y
  Conv2dBackwardData,    ///< in: dy, w                 out: dx
  Conv2dBackwardWeight,  ///< in: x, dy                 out: dw, [db]
  LinearForward,         ///< in: x(M,K), w(N,K), [b(N)] out: y(M,N)
  LinearBackward,        ///< in: dy(M,N), x(M,K), w(N,K) out: [dx(M,K)], dw(N,K), [db(N)]
  LayerNormForward,      ///< in: x, gamma(C), beta(C)  out: y, mean, rstd   (over dim 1)
  LayerNormBackward,     ///< in: dy, x, gamma, mean, rstd  out: dx, dgamma, dbeta
  ActivationForward,     ///< in: x                     out: y
  ActivationBackward,    ///< in: dy, saved (x for gelu, y for relu/sigmoid)  out: dx
  ChannelMoments,        ///< in: x (N,C,...)           out: sum(C), sumsq(C)   (f64 outputs)
  BatchNormForward,      ///< in: x, mean(C), rstd(C), gamma(C), beta(C)  out: y
  BatchNormBackwardReduce,  ///< in: dy, x, mean, rstd  out: sum_dy(C), sum_dy_xhat(C) (f64)
  BatchNormBackwardData,    ///< in: dy, x, mean, rstd, gamma, sum_dy, sum_dy_xhat  out: dx
  ScaleChannels,         ///< in: x (N,C,...), s (C) or (N,C)  out: y = x·s
  ScaleChannelsBackward, ///< in: dy, x, s               out: [dx], ds (same shape as s)
  ChannelSum,            ///< in: x (N,C,H,W)           out: y (N,C) = Σ_hw x
  ChannelBroadcast,      ///< in: g (N,C)               out: y (N,C,H,W) = g·f0 (+ y when accumulate)
  Add,                   ///< in: a, b                  out: y = a + b
  Axpy,                  ///< in: x                     out: y += f0·x
  ScaleSamples,          ///< in: x (N,...), s (N)      out: y = x·s[n]
  SoftmaxCrossEntropy,   ///< in: logits (N,K,...), labels i64 (N,...)  out: loss f64 (1), dlogits
  UpsampleNearest,       ///< in: x (N,C,H,W)           out: y (N,C,H·i0,W·i0)
  UpsampleNearestBackward,  ///< in: dy                  out: dx (sums each i0×i0 block)
  SgdStep,               ///< in: grad  out: param, momentum_buf   f: lr, momentum, weight_decay, nesterov
  AdamWStep,             ///< in: grad  out: param, m, v           f: lr, beta1, beta2, eps, wd, step
  SumSquares,            ///< in: x                     out: s f64 (1) = Σ x²
  Scale,                 ///< out: y *= f0 (in place)
  kCount
};
std::string_view op_name(OpKind k) noexcept;

/// One kernel call: up to 7 inputs and 4 outputs (null = absent), the convolution geometry, the
/// activation, float and integer parameters, and whether outputs are accumulated into.
struct OpCall {
  OpKind kind = OpKind::Add;
  std::array<const core::Tensor*, 7> in{};
  std::array<core::Tensor*, 4> out{};
  Conv2dParams conv;
  Activation act = Activation::Relu;
  std::array<double, 6> f{};
  std::array<std::int64_t, 2> i{};
  bool accumulate = false;
};

/// What a call costs, from shapes alone: the same formula serves the runtime's traces and the
/// simulator's time model.
struct OpCost {
  double flops = 0;
  std::int64_t bytes_read = 0;
  std::int64_t bytes_written = 0;
  /// Convolutions: the output rows the kernel loops over (N·C·H of the output for forward and
  /// weight gradient, of dx for the data gradient), each with a fixed cost that dominates narrow
  /// windows such as a sharded convolution's borders; 0 for other ops.
  double rows = 0;
};
OpCost op_cost(const OpCall& call);

// ---- typed entry points: check arguments, then backend.execute(call) -------------------------
// All tensors of one call share a float dtype (f32 or f64) except labels (i64) and the f64
// reduction outputs named below. Outputs are preallocated by the caller and overwritten unless
// `accumulate` says otherwise. Inputs may be strided views unless noted.

void conv2d_forward(Backend& b, const Conv2dParams& p, const core::Tensor& x, const core::Tensor& w,
                    const core::Tensor* bias, core::Tensor& y);
void conv2d_backward_data(Backend& b, const Conv2dParams& p, const core::Tensor& dy,
                          const core::Tensor& w, core::Tensor& dx, bool accumulate = false);
void conv2d_backward_weight(Backend& b, const Conv2dParams& p, const core::Tensor& x,
                            const core::Tensor& dy, core::Tensor& dw, core::Tensor* db,
                            bool accumulate = false);

/// y (M,N) = x (M,K) · wᵀ + bias.
void linear_forward(Backend& b, const core::Tensor& x, const core::Tensor& w, const core::Tensor* bias,
                    core::Tensor& y);
/// dx = dy·w (skipped when dx is null), dw (+)= dyᵀ·x, db (+)= Σ_m dy (skipped when null).
void linear_backward(Backend& b, const core::Tensor& dy, const core::Tensor& x, const core::Tensor& w,
                     core::Tensor* dx, core::Tensor& dw, core::Tensor* db, bool accumulate = false);

/// Normalises over dim 1 (channels) for every other index: x (N,C) or (N,C,H,W).
/// mean and rstd have x's shape without dim 1 (f32/f64 like x); y = (x−mean)·rstd·gamma + beta.
void layernorm_forward(Backend& b, const core::Tensor& x, const core::Tensor& gamma,
                       const core::Tensor& beta, double eps, core::Tensor& y, core::Tensor& mean,
                       core::Tensor& rstd);
/// dgamma, dbeta are accumulated when `accumulate`.
void layernorm_backward(Backend& b, const core::Tensor& dy, const core::Tensor& x,
                        const core::Tensor& gamma, const core::Tensor& mean, const core::Tensor& rstd,
                        core::Tensor& dx, core::Tensor& dgamma, core::Tensor& dbeta,
                        bool accumulate = false);

void activation_forward(Backend& b, Activation a, const core::Tensor& x, core::Tensor& y);
/// `saved` is x for Gelu and y for Relu and Sigmoid.
void activation_backward(Backend& b, Activation a, const core::Tensor& dy, const core::Tensor& saved,
                         core::Tensor& dx);

/// Per-channel Σx and Σx² over every index but dim 1, into f64 tensors of shape (C).
void channel_moments(Backend& b, const core::Tensor& x, core::Tensor& sum, core::Tensor& sumsq);
void batchnorm_forward(Backend& b, const core::Tensor& x, const core::Tensor& mean,
                       const core::Tensor& rstd, const core::Tensor& gamma, const core::Tensor& beta,
                       core::Tensor& y);
/// Per-channel Σdy and Σdy·x̂ (x̂ = (x−mean)·rstd) into f64 tensors of shape (C).
void batchnorm_backward_reduce(Backend& b, const core::Tensor& dy, const core::Tensor& x,
                               const core::Tensor& mean, const core::Tensor& rstd,
                               core::Tensor& sum_dy, core::Tensor& sum_dy_xhat);
/// dx = gamma·rstd·(dy − sum_dy/count − x̂·sum_dy_xhat/count), count = elements per channel
/// over the whole (global) batch.
void batchnorm_backward_data(Backend& b, const core::Tensor& dy, const core::Tensor& x,
                             const core::Tensor& mean, const core::Tensor& rstd,
                             const core::Tensor& gamma, const core::Tensor& sum_dy,
                             const core::Tensor& sum_dy_xhat, double count, core::Tensor& dx);

/// y = x·s with s of shape (C) or (N,C), broadcast over the remaining dims.
void scale_channels(Backend& b, const core::Tensor& x, const core::Tensor& s, core::Tensor& y);
/// dx = dy·s (skipped when null); ds (+)= Σ dy·x over the broadcast dims.
void scale_channels_backward(Backend& b, const core::Tensor& dy, const core::Tensor& x,
                             const core::Tensor& s, core::Tensor* dx, core::Tensor& ds,
                             bool accumulate = false);

/// y (N,C) = Σ over (H,W) of x (N,C,H,W).
void channel_sum(Backend& b, const core::Tensor& x, core::Tensor& y);
/// y (N,C,H,W) (+)= g (N,C)·scale.
void channel_broadcast(Backend& b, const core::Tensor& g, double scale, core::Tensor& y,
                       bool accumulate = false);

void add(Backend& b, const core::Tensor& a, const core::Tensor& c, core::Tensor& y);
/// y += alpha·x.
void axpy(Backend& b, double alpha, const core::Tensor& x, core::Tensor& y);
/// y *= alpha (contiguous y).
void scale(Backend& b, double alpha, core::Tensor& y);
/// y = x·s[n] for the leading dim.
void scale_samples(Backend& b, const core::Tensor& x, const core::Tensor& s, core::Tensor& y);

/// Softmax over dim 1 of logits (N,K) or (N,K,H,W) against i64 labels (N) or (N,H,W); labels
/// < 0 are ignored. loss (f64, shape (1)) = Σ −log softmax at the label; dlogits =
/// (softmax − onehot)·grad_scale (zero where ignored). Throws InvalidArgument for a label ≥ K.
void softmax_cross_entropy(Backend& b, const core::Tensor& logits, const core::Tensor& labels,
                           double grad_scale, core::Tensor& loss, core::Tensor& dlogits);

void upsample_nearest(Backend& b, const core::Tensor& x, int factor, core::Tensor& y);
void upsample_nearest_backward(Backend& b, const core::Tensor& dy, int factor, core::Tensor& dx);

/// p −= lr·(v) with v = momentum·buf + (g + wd·p) (buf updated; nesterov: v = g' + momentum·buf).
/// Contiguous tensors of one shape.
void sgd_step(Backend& b, core::Tensor& param, const core::Tensor& grad, core::Tensor& buf, double lr,
              double momentum, double weight_decay, bool nesterov);
/// AdamW (decoupled weight decay) with bias correction for 1-based `step`.
void adamw_step(Backend& b, core::Tensor& param, const core::Tensor& grad, core::Tensor& m,
                core::Tensor& v, double lr, double beta1, double beta2, double eps,
                double weight_decay, std::int64_t step);
/// out (f64, shape (1)) = Σ x² (accumulated in f64).
void sum_squares(Backend& b, const core::Tensor& x, core::Tensor& out);

}  // namespace tessera::compute
