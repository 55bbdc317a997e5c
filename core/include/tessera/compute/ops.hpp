// The kernels a compute backend provides, as one enum of operations plus typed functions that
// check their arguments and hand an OpCall to Backend::execute. One choke point keeps decorators
// (tracing, the simulator's recorder) small and gives every op one cost formula (op_cost).
//
// Every op is one line of TESSERA_COMPUTE_OPS below (its OpKind and name), one typed entry point
// declared in this file, and one entry of the op table (compute/op_table.hpp: its inputs, outputs
// and scalars by name, dtype rules and cost), defined with the entry point in core/src/compute/.
// docs/decisions/0002-one-compute-entry-point.md has the recipe for adding one.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "tessera/compute/backend.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::compute {

enum class Activation : std::uint8_t { Relu, Gelu, Sigmoid };
std::string_view activation_name(Activation a) noexcept;

/// The convolutions, X(Kind, name): they carry Conv2dParams, and backends give them paths of their
/// own. Their slots: conv2d_forward in x, w, [bias] out y; conv2d_backward_data in dy, w out dx;
/// conv2d_backward_weight in x, dy out dw, [db].
#define TESSERA_COMPUTE_CONV_OPS(X)               \
  X(Conv2dForward, conv2d_forward)                \
  X(Conv2dBackwardData, conv2d_backward_data)     \
  X(Conv2dBackwardWeight, conv2d_backward_weight)

/// Every other op, X(Kind, name), each one kernel of a backend (the cpu backend's dispatch and
/// kernel declarations are generated from this list). New ops go at the end.
#define TESSERA_COMPUTE_KERNEL_OPS(X)                   \
  X(LinearForward, linear_forward)                      \
  X(LinearBackward, linear_backward)                    \
  X(LayerNormForward, layernorm_forward)                \
  X(LayerNormBackward, layernorm_backward)              \
  X(ActivationForward, activation_forward)              \
  X(ActivationBackward, activation_backward)            \
  X(ChannelMoments, channel_moments)                    \
  X(BatchNormForward, batchnorm_forward)                \
  X(BatchNormBackwardReduce, batchnorm_backward_reduce) \
  X(BatchNormBackwardData, batchnorm_backward_data)     \
  X(ScaleChannels, scale_channels)                      \
  X(ScaleChannelsBackward, scale_channels_backward)     \
  X(ChannelSum, channel_sum)                            \
  X(ChannelBroadcast, channel_broadcast)                \
  X(Add, add)                                           \
  X(Axpy, axpy)                                         \
  X(ScaleSamples, scale_samples)                        \
  X(SoftmaxCrossEntropy, softmax_cross_entropy)         \
  X(UpsampleNearest, upsample_nearest)                  \
  X(UpsampleNearestBackward, upsample_nearest_backward) \
  X(SgdStep, sgd_step)                                  \
  X(AdamWStep, adamw_step)                              \
  X(SumSquares, sum_squares)                            \
  X(Scale, scale)                                       \
  X(Copy, copy)                                         \
  X(TopKSelect, topk_select)                            \
  X(TopKScatterAdd, topk_scatter_add)                   \
  X(TopKResidual, topk_residual)

/// Every op, in OpKind order.
#define TESSERA_COMPUTE_OPS(X) TESSERA_COMPUTE_CONV_OPS(X) TESSERA_COMPUTE_KERNEL_OPS(X)

/// Every kernel; what each takes is its op table entry (op_spec). Shapes use NCHW for images,
/// (M,K) for matrices.
enum class OpKind : std::uint8_t {
#define TESSERA_OP_KIND(kind, name) kind,
  TESSERA_COMPUTE_OPS(TESSERA_OP_KIND)
#undef TESSERA_OP_KIND
  kCount
};
/// The op's name ("conv2d_forward", ...): the name of its typed entry point, of its trace events
/// and of its calibration entries. "?" outside [0, kCount).
std::string_view op_name(OpKind k) noexcept;
/// True for the three convolutions.
constexpr bool is_conv(OpKind k) noexcept {
  return k == OpKind::Conv2dForward || k == OpKind::Conv2dBackwardData || k == OpKind::Conv2dBackwardWeight;
}

inline constexpr int kMaxOpInputs = 7, kMaxOpOutputs = 4, kMaxOpScalars = 6, kMaxOpIntegers = 2;

/// One kernel call: tensors and parameters in the slots of the op's table entry (null = absent),
/// the convolution geometry, the activation, and whether outputs are accumulated into. Read it by
/// name (`call.input("x")`, `call.scalar("eps")`); the slot arrays are the storage, filled in the
/// table's order by the typed entry points.
struct OpCall {
  OpKind kind = OpKind::Add;
  std::array<const core::Tensor*, kMaxOpInputs> in{};
  std::array<core::Tensor*, kMaxOpOutputs> out{};
  Conv2dParams conv{};
  Activation act = Activation::Relu;
  std::array<double, kMaxOpScalars> scalars{};
  std::array<std::int64_t, kMaxOpIntegers> integers{};
  bool accumulate = false;

  /// The input the op's table entry calls `name`. Throws InternalError for a name the entry lacks
  /// or an input the call lacks (use input_if for optional ones).
  const core::Tensor& input(std::string_view name) const;
  /// The input called `name`, or null where the call leaves it out.
  const core::Tensor* input_if(std::string_view name) const;
  core::Tensor& output(std::string_view name) const;
  core::Tensor* output_if(std::string_view name) const;
  /// The float (double) and integer parameters by name.
  double scalar(std::string_view name) const;
  std::int64_t integer(std::string_view name) const;
  void set_scalar(std::string_view name, double value);
  void set_integer(std::string_view name, std::int64_t value);
};

/// The weight-shaped tensor of a convolution call: w, or dw of conv2d_backward_weight.
const core::Tensor& conv_weight(const OpCall& call);
/// The output-shaped tensor of a convolution call: y, or dy of the two backward ops.
const core::Tensor& conv_output(const OpCall& call);

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
/// Bytes of every tensor of the call (outputs read too where the op updates them or accumulates)
/// and the FLOPs and rows of the op's table entry.
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
/// y = x converted to y's float dtype (rounded to nearest), one shape, either side any strides
/// (a shard, a halo window). x and y must not overlap unless they are one tensor. Every backend
/// converts between any two of f32, f64, bf16 and f16 (16-bit rounding: core/half.hpp).
void copy(Backend& b, const core::Tensor& x, core::Tensor& y);

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

// Top-k gradient compression with error feedback (nn/grad_compression.hpp says the scheme). f32 or
// f64 buckets, contiguous tensors. A pair buffer holds k indices then the k values' bits, in slots
// of the bucket's width: i32 for f32, i64 for f64 (the op table's Index slots).

/// acc = grad + scale·residual; the k indices of the largest |acc| (NaN counts as largest, ties go
/// to the lower index), ascending, into pairs[0, k), their acc values' bits into pairs[k, 2k).
/// `order` (n slots) is scratch. 1 <= k <= n; pairs has 2k slots.
void topk_select(Backend& b, const core::Tensor& grad, const core::Tensor& residual, double scale, std::int64_t k,
                 core::Tensor& acc, core::Tensor& order, core::Tensor& pairs);
/// grad = the sum, over the blocks of 2k slots of `recv` in order (one per rank), of each
/// block's pairs (grad[index] += value), zero where no block has an index. An index outside grad
/// throws InvalidArgument (a corrupted buffer), naming the block.
void topk_scatter_add(Backend& b, const core::Tensor& recv, std::int64_t k, core::Tensor& grad);
/// acc at the k indices of `sent` (its first k slots; sent has 2k) set to 0, then
/// residual = acc·inv_scale.
void topk_residual(Backend& b, const core::Tensor& sent, double inv_scale, core::Tensor& acc, core::Tensor& residual);

}  // namespace tessera::compute
