// run_kernel_op: routes a non-library compute call (core has checked it against the op table) to
// the passes of its kernel, for the call's float dtype, on any launcher (pass.hpp): the host loop
// of the cuda-kernels@host backend and the GPU launcher of the cuda backend share this routing.
// Also the tensor helpers behind core's Tensor::copy_from / add_from / fill and the halo
// pack/unpack (run_tensor_copy, run_tensor_add, run_tensor_fill). Host code; it includes core's
// compute headers and compiles under g++ and nvcc alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "activation.hpp"
#include "batchnorm.hpp"
#include "channel.hpp"
#include "copy.hpp"
#include "layernorm.hpp"
#include "loss.hpp"
#include "optim.hpp"
#include "pointwise.hpp"
#include "tessera/compute/op_table.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"
#include "upsample.hpp"
#include "view_host.hpp"

namespace tessera::compute::cuda::kernels {

namespace detail_dispatch {

template <class T>
View<const T> in(const OpCall& c, std::string_view name) {
  return make_view<const T>(c.input(name));
}
template <class T>
View<T> out(const OpCall& c, std::string_view name) {
  return make_view<T>(c.output(name));
}
/// An optional output's view (data null when the call leaves it out).
template <class T>
View<T> out_if(const OpCall& c, std::string_view name) {
  const core::Tensor* t = c.output_if(name);
  return t ? make_view<T>(*t) : View<T>{};
}

/// "[n]" or "[n,h,w]": the position of row-major index i in `shape`.
inline std::string position_of(const core::Shape& shape, std::int64_t i) {
  core::Shape idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] > 0 ? i % shape[d] : 0;
    i = shape[d] > 0 ? i / shape[d] : 0;
  }
  return core::shape_str(idx);
}

template <class L, class T>
void run_softmax_ce(L& l, const OpCall& c) {
  const core::Tensor& labels = c.input("labels");
  SoftmaxCeParams<T> q{};
  q.logits = in<T>(c, "logits");
  q.labels = make_view<const std::int64_t>(labels);
  q.dlogits = out<T>(c, "dlogits");
  q.loss = out<double>(c, "loss");
  q.grad_scale = c.scalar("grad_scale");
  const BadLabel bad = run_softmax_cross_entropy(l, q);
  const std::int64_t k = q.logits.shape[1];
  TESSERA_CHECK(bad.index < 0, "softmax_cross_entropy: label ", bad.label, " at position ",
                position_of(labels.shape(), bad.index), " of labels ", labels.describe(),
                " is out of range for ", k, " classes (labels must be < ", k,
                "; negative labels are ignored)");
}

template <class L, class T>
void run_copy_op(L& l, const OpCall& c) {
  const core::Tensor& y = c.output("y");
  switch (y.dtype()) {
    case core::DType::F32:
      return run_copy(l, CopyParams<T, float>{in<T>(c, "x"), make_view<float>(y)});
    case core::DType::F64:
      return run_copy(l, CopyParams<T, double>{in<T>(c, "x"), make_view<double>(y)});
    default:
      throw Unsupported(
          tessera::detail::cat("copy: target ", y.describe(),
                               " is not supported yet (the kernels convert between f32 and "
                               "f64; bf16/f16 come with a later issue)"));
  }
}

template <class L, class T>
void run_typed(L& l, const OpCall& c, std::string_view who) {
  switch (c.kind) {
    case OpKind::LayerNormForward:
      return run_layernorm_forward(
          l, LayerNormForwardParams<T>{in<T>(c, "x"), in<T>(c, "gamma"), in<T>(c, "beta"),
                                       out<T>(c, "y"), out<T>(c, "mean"), out<T>(c, "rstd"),
                                       c.scalar("eps"), 0, 0});
    case OpKind::LayerNormBackward:
      return run_layernorm_backward(
          l,
          LayerNormBackwardParams<T>{in<T>(c, "dy"), in<T>(c, "x"), in<T>(c, "gamma"),
                                     in<T>(c, "mean"), in<T>(c, "rstd"), out<T>(c, "dx"),
                                     out<T>(c, "dgamma"), out<T>(c, "dbeta"), c.accumulate, 0, 0});
    case OpKind::ActivationForward:
      return run_activation_forward(
          l, ActForwardParams<T>{in<T>(c, "x"), out<T>(c, "y"), Act(int(c.act))});
    case OpKind::ActivationBackward:
      return run_activation_backward(l, ActBackwardParams<T>{in<T>(c, "dy"), in<T>(c, "saved"),
                                                             out<T>(c, "dx"), Act(int(c.act))});
    case OpKind::ChannelMoments:
      return run_channel_moments(l, ChannelMomentsParams<T>{in<T>(c, "x"), out<double>(c, "sum"),
                                                            out<double>(c, "sumsq")});
    case OpKind::BatchNormForward:
      return run_batchnorm_forward(
          l, BatchNormForwardParams<T>{in<T>(c, "x"), in<T>(c, "mean"), in<T>(c, "rstd"),
                                       in<T>(c, "gamma"), in<T>(c, "beta"), out<T>(c, "y"), 0, 0});
    case OpKind::BatchNormBackwardReduce:
      return run_batchnorm_backward_reduce(
          l, BatchNormBackwardReduceParams<T>{in<T>(c, "dy"), in<T>(c, "x"), in<T>(c, "mean"),
                                              in<T>(c, "rstd"), out<double>(c, "sum_dy"),
                                              out<double>(c, "sum_dy_xhat")});
    case OpKind::BatchNormBackwardData:
      return run_batchnorm_backward_data(
          l, BatchNormBackwardDataParams<T>{in<T>(c, "dy"), in<T>(c, "x"), in<T>(c, "mean"),
                                            in<T>(c, "rstd"), in<T>(c, "gamma"),
                                            in<double>(c, "sum_dy"), in<double>(c, "sum_dy_xhat"),
                                            out<T>(c, "dx"), c.scalar("count"), 0, 0});
    case OpKind::ScaleChannels:
      return run_scale_channels(
          l, ScaleChannelsParams<T>{in<T>(c, "x"), in<T>(c, "s"), out<T>(c, "y"), {}});
    case OpKind::ScaleChannelsBackward:
      return run_scale_channels_backward(
          l, ScaleChannelsBackwardParams<T>{in<T>(c, "dy"), in<T>(c, "x"), in<T>(c, "s"),
                                            out_if<T>(c, "dx"), out<T>(c, "ds"), c.accumulate});
    case OpKind::ChannelSum:
      return run_channel_sum(l, ChannelSumParams<T>{in<T>(c, "x"), out<T>(c, "y")});
    case OpKind::ChannelBroadcast:
      return run_channel_broadcast(
          l, ChannelBroadcastParams<T>{
                 in<T>(c, "g"), out<T>(c, "y"), c.scalar("scale"), c.accumulate, {}});
    case OpKind::Add:
      return run_add(l, AddParams<T>{in<T>(c, "a"), in<T>(c, "b"), out<T>(c, "y")});
    case OpKind::Axpy:
      return run_axpy(
          l, AxpyParams<T>{in<T>(c, "x"), out<T>(c, "y"), static_cast<T>(c.scalar("alpha"))});
    case OpKind::ScaleSamples:
      return run_scale_samples(
          l, ScaleSamplesParams<T>{in<T>(c, "x"), in<T>(c, "s"), out<T>(c, "y"), 0});
    case OpKind::SoftmaxCrossEntropy:
      return run_softmax_ce<L, T>(l, c);
    case OpKind::UpsampleNearest:
      return run_upsample_nearest(
          l, UpsampleParams<T>{in<T>(c, "x"), out<T>(c, "y"), c.integer("factor")});
    case OpKind::UpsampleNearestBackward:
      return run_upsample_nearest_backward(
          l, UpsampleParams<T>{in<T>(c, "dy"), out<T>(c, "dx"), c.integer("factor")});
    case OpKind::SgdStep:
      return run_sgd_step(
          l, SgdParams<T>{out<T>(c, "param"), out<T>(c, "momentum_buf"), in<T>(c, "grad"),
                          static_cast<T>(c.scalar("lr")), static_cast<T>(c.scalar("momentum")),
                          static_cast<T>(c.scalar("weight_decay")), c.scalar("nesterov") != 0.0});
    case OpKind::AdamWStep: {
      AdamWParams<T> q{};
      q.param = out<T>(c, "param");
      q.m = out<T>(c, "m");
      q.v = out<T>(c, "v");
      q.grad = in<T>(c, "grad");
      set_adamw_constants(q, c.scalar("lr"), c.scalar("beta1"), c.scalar("beta2"), c.scalar("eps"),
                          c.scalar("weight_decay"), c.integer("step"));
      return run_adamw_step(l, q);
    }
    case OpKind::SumSquares:
      return run_sum_squares(l, SumSquaresParams<T>{in<T>(c, "x"), out<double>(c, "sum")});
    case OpKind::Scale:
      return run_scale(l, ScaleParams<T>{out<T>(c, "y"), static_cast<T>(c.scalar("alpha"))});
    case OpKind::Copy:
      return run_copy_op<L, T>(l, c);
    case OpKind::Conv2dForward:
    case OpKind::Conv2dBackwardData:
    case OpKind::Conv2dBackwardWeight:
    case OpKind::LinearForward:
    case OpKind::LinearBackward:
      throw Unsupported(
          tessera::detail::cat(who, ": ", op_name(c.kind),
                               " runs on the GPU through cuDNN/cuBLAS only; the own kernels "
                               "of backends/compute/cuda/kernels do not cover it"));
    default:
      throw Unsupported(tessera::detail::cat(who, ": ", op_name(c.kind), " has no kernel"));
  }
}

/// Calls body(W{}) with W the unsigned word of `bytes` bytes.
template <class Body>
void by_word(std::size_t bytes, const core::Tensor& t, Body&& body) {
  switch (bytes) {
    case 1:
      return body(std::uint8_t{});
    case 2:
      return body(std::uint16_t{});
    case 4:
      return body(std::uint32_t{});
    case 8:
      return body(std::uint64_t{});
    default:
      throw Unsupported(tessera::detail::cat("cuda kernels: tensor ", t.describe(), " has ", bytes,
                                             "-byte elements, which the copy kernels do not move"));
  }
}

}  // namespace detail_dispatch

/// Runs `call` on `launcher` (see pass.hpp for the launcher concept). `who` names the backend in
/// errors. Throws Unsupported for the convolutions and linear ops (library calls of the cuda
/// backend) and for a float dtype other than f32/f64; InvalidArgument for a label ≥ K of
/// softmax_cross_entropy (before anything is written).
template <class L>
void run_kernel_op(L& launcher, const OpCall& call, std::string_view who = "cuda") {
  const core::Tensor* lead = float_lead(call);
  TESSERA_ASSERT(lead != nullptr, op_name(call.kind), " call without a float tensor");
  const core::DType dt = lead->dtype();
  if (dt == core::DType::F32) return detail_dispatch::run_typed<L, float>(launcher, call, who);
  if (dt == core::DType::F64) return detail_dispatch::run_typed<L, double>(launcher, call, who);
  throw Unsupported(tessera::detail::cat(who, " ", op_name(call.kind), ": dtype ",
                                         core::dtype_name(dt), " of ", lead->describe(),
                                         " is not supported yet (the kernels compute in f32 and "
                                         "f64; bf16/f16 come with a later issue)"));
}

/// dst = src element by element (same shape and dtype, any dtype, any strides; bitwise): core's
/// Tensor::copy_from and the halo pack/unpack of strided slabs. A no-op when either is meta.
template <class L>
void run_tensor_copy(L& launcher, const core::Tensor& src, core::Tensor& dst) {
  TESSERA_CHECK(src.shape() == dst.shape() && src.dtype() == dst.dtype(), "cuda kernels: copy of ",
                src.describe(), " into ", dst.describe(), " needs one shape and dtype");
  if (src.is_meta() || dst.is_meta() || dst.numel() == 0) return;
  detail_dispatch::by_word(core::dtype_size(dst.dtype()), dst, [&](auto w) {
    using W = decltype(w);
    run_copy(launcher, CopyParams<W, W>{make_raw_view<const W>(src), make_raw_view<W>(dst)});
  });
}

/// dst += src (same shape, f32 or f64, one dtype, any strides): core's Tensor::add_from.
template <class L>
void run_tensor_add(L& launcher, const core::Tensor& src, core::Tensor& dst) {
  TESSERA_CHECK(src.shape() == dst.shape() && src.dtype() == dst.dtype(), "cuda kernels: add of ",
                src.describe(), " into ", dst.describe(), " needs one shape and dtype");
  if (src.is_meta() || dst.is_meta() || dst.numel() == 0) return;
  if (dst.dtype() == core::DType::F32)
    return run_add_into(launcher,
                        AddIntoParams<float>{make_view<const float>(src), make_view<float>(dst)});
  if (dst.dtype() == core::DType::F64)
    return run_add_into(
        launcher, AddIntoParams<double>{make_view<const double>(src), make_view<double>(dst)});
  throw Unsupported(
      tessera::detail::cat("cuda kernels: add into ", dst.describe(),
                           " is not supported yet (f32 and f64 are; bf16/f16 come with a "
                           "later issue)"));
}

/// Every element of t = value (f32, f64), or zero (any dtype, value 0): core's Tensor::fill.
template <class L>
void run_tensor_fill(L& launcher, core::Tensor& t, double value) {
  if (t.is_meta() || t.numel() == 0) return;
  if (t.dtype() == core::DType::F32)
    return run_fill(launcher, FillParams<float>{make_view<float>(t), static_cast<float>(value)});
  if (t.dtype() == core::DType::F64)
    return run_fill(launcher, FillParams<double>{make_view<double>(t), value});
  if (value == 0.0)
    return detail_dispatch::by_word(core::dtype_size(t.dtype()), t, [&](auto w) {
      using W = decltype(w);
      run_fill(launcher, FillParams<W>{make_raw_view<W>(t), W{0}});
    });
  throw Unsupported(tessera::detail::cat("cuda kernels: fill of ", t.describe(), " with ", value,
                                         " is not supported yet (f32 and f64 take any value, other "
                                         "dtypes 0; bf16/f16 values come with a later issue)"));
}

}  // namespace tessera::compute::cuda::kernels
