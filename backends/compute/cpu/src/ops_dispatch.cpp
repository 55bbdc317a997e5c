// run_cpu_op: checks the dtypes of a non-convolution call and routes it to its kernel.
#include <optional>

#include "cpu_ops.hpp"
#include "ops_common.hpp"
#include "ops_kernels.hpp"

namespace tessera::compute::cpu {

namespace {

using core::DType;

// The dtype a tensor slot must hold when it is not the call's float dtype: the f64 reductions
// and the i64 labels.
std::optional<DType> fixed_dtype(OpKind k, bool input, int slot) {
  switch (k) {
    case OpKind::ChannelMoments:
    case OpKind::BatchNormBackwardReduce:
      if (!input) return DType::F64;
      break;
    case OpKind::BatchNormBackwardData:
      if (input && (slot == 5 || slot == 6)) return DType::F64;
      break;
    case OpKind::SoftmaxCrossEntropy:
      if (input && slot == 1) return DType::I64;
      if (!input && slot == 0) return DType::F64;
      break;
    case OpKind::SumSquares:
      if (!input) return DType::F64;
      break;
    default: break;
  }
  return std::nullopt;
}

void check_dtypes(const OpCall& c, DType dt) {
  auto check = [&](const core::Tensor* t, bool input, int slot) {
    if (t == nullptr) return;
    const DType want = fixed_dtype(c.kind, input, slot).value_or(dt);
    TESSERA_CHECK(t->dtype() == want, "cpu ", op_name(c.kind), ": ", input ? "input " : "output ", slot,
                  " ", t->describe(), " must be ", core::dtype_name(want),
                  " (all tensors of a call share one float dtype, except the f64 reductions and "
                  "i64 labels)");
  };
  for (int i = 0; i < static_cast<int>(c.in.size()); ++i) check(c.in[i], true, i);
  for (int i = 0; i < static_cast<int>(c.out.size()); ++i) check(c.out[i], false, i);
}

template <class T>
void run_typed(const OpCall& c, ThreadPool& pool) {
  using namespace ops;
  switch (c.kind) {
    case OpKind::LinearForward: return run_linear_forward<T>(c, pool);
    case OpKind::LinearBackward: return run_linear_backward<T>(c, pool);
    case OpKind::LayerNormForward: return run_layernorm_forward<T>(c, pool);
    case OpKind::LayerNormBackward: return run_layernorm_backward<T>(c, pool);
    case OpKind::ActivationForward: return run_activation_forward<T>(c, pool);
    case OpKind::ActivationBackward: return run_activation_backward<T>(c, pool);
    case OpKind::ChannelMoments: return run_channel_moments<T>(c, pool);
    case OpKind::BatchNormForward: return run_batchnorm_forward<T>(c, pool);
    case OpKind::BatchNormBackwardReduce: return run_batchnorm_backward_reduce<T>(c, pool);
    case OpKind::BatchNormBackwardData: return run_batchnorm_backward_data<T>(c, pool);
    case OpKind::ScaleChannels: return run_scale_channels<T>(c, pool);
    case OpKind::ScaleChannelsBackward: return run_scale_channels_backward<T>(c, pool);
    case OpKind::ChannelSum: return run_channel_sum<T>(c, pool);
    case OpKind::ChannelBroadcast: return run_channel_broadcast<T>(c, pool);
    case OpKind::Add: return run_add<T>(c, pool);
    case OpKind::Axpy: return run_axpy<T>(c, pool);
    case OpKind::Scale: return run_scale<T>(c, pool);
    case OpKind::ScaleSamples: return run_scale_samples<T>(c, pool);
    case OpKind::SoftmaxCrossEntropy: return run_softmax_cross_entropy<T>(c, pool);
    case OpKind::UpsampleNearest: return run_upsample_nearest<T>(c, pool);
    case OpKind::UpsampleNearestBackward: return run_upsample_nearest_backward<T>(c, pool);
    case OpKind::SgdStep: return run_sgd_step<T>(c, pool);
    case OpKind::AdamWStep: return run_adamw_step<T>(c, pool);
    case OpKind::SumSquares: return run_sum_squares<T>(c, pool);
    default:
      throw Unsupported(detail::cat("cpu: ", op_name(c.kind), " is not one of the non-convolution ops"));
  }
}

}  // namespace

void run_cpu_op(const OpCall& call, ThreadPool& pool) {
  const core::Tensor* lead = call.in[0] ? call.in[0] : call.out[0];
  TESSERA_ASSERT(lead != nullptr, op_name(call.kind), " call without tensors");
  const DType dt = lead->dtype();
  if (!core::dtype_is_float(dt))
    throw Unsupported(detail::cat("cpu ", op_name(call.kind), ": dtype ", core::dtype_name(dt), " of ",
                                  lead->describe(), " is not supported (the cpu backend computes in f32 and f64)"));
  check_dtypes(call, dt);
  if (dt == DType::F32)
    run_typed<float>(call, pool);
  else
    run_typed<double>(call, pool);
}

}  // namespace tessera::compute::cpu
