// run_kernel_op: routes a non-library compute call (core has checked it against the op table) to
// the passes of its kernel, for the call's float dtype, on any launcher (pass.hpp): the host loop
// of the cuda-kernels@host backend and the GPU launcher of the cuda backend share this routing.
// bf16/f16 calls: the elementwise ops, layernorm and scale_channels load and store 16-bit
// elements in their bodies (run_native_half); the others run the f32 bodies on widened copies
// (run_widened: widen each 16-bit tensor into f32 scratch, run the f32 op, round each 16-bit
// output once); copy converts between all float dtypes directly. Both give the f32 kernel's
// result rounded once. Also the tensor helpers behind core's Tensor::copy_from /
// add_from / fill, the halo pack/unpack and the library paths' conversions (run_tensor_copy,
// run_tensor_add, run_tensor_fill, run_tensor_convert). Host code; it includes core's compute
// headers and compiles under g++ and nvcc alike.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "activation.hpp"
#include "batchnorm.hpp"
#include "channel.hpp"
#include "copy.hpp"
#include "half.hpp"
#include "layernorm.hpp"
#include "loss.hpp"
#include "optim.hpp"
#include "pointwise.hpp"
#include "tessera/compute/op_table.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/half.hpp"
#include "topk.hpp"
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

/// The contiguous data of a top-k bucket or pair buffer of element type E (core has checked the
/// slots: flat, contiguous, i32 pairs with f32 buckets and i64 with f64).
template <class E>
E* flat_data(const core::Tensor& t) {
  TESSERA_ASSERT(t.is_contiguous() && core::dtype_size(t.dtype()) == sizeof(E),
                 "top-k kernels: ", t.describe(), " is not a contiguous vector of ", sizeof(E),
                 "-byte slots");
  return t.numel() > 0 ? static_cast<E*>(t.raw_data()) : nullptr;
}

/// topk_select, topk_scatter_add, topk_residual (f32 and f64 buckets; topk.hpp). A corrupted pair
/// buffer is refused before anything is written, with the cpu backend's message.
template <class L, class T>
void run_topk(L& l, const OpCall& c) {
  using I = TopKSlot<T>;
  switch (c.kind) {
    case OpKind::TopKSelect: {
      TopKSelectParams<T> q{};
      q.grad = flat_data<const T>(c.input("grad"));
      q.residual = flat_data<const T>(c.input("residual"));
      q.acc = flat_data<T>(c.output("acc"));
      q.keys = reinterpret_cast<TopKKey<T>*>(flat_data<I>(c.output("order")));
      q.pairs = flat_data<I>(c.output("pairs"));
      q.scale = static_cast<T>(c.scalar("scale"));
      q.n = c.input("grad").numel();
      q.k = c.integer("k");
      return run_topk_select(l, q);
    }
    case OpKind::TopKScatterAdd: {
      const core::Tensor& recv = c.input("recv");
      TopKScatterParams<T> q{};
      q.recv = flat_data<const I>(recv);
      q.grad = flat_data<T>(c.output("grad"));
      q.n = c.output("grad").numel();
      q.k = c.integer("k");
      const TopKBadIndex bad = run_topk_scatter_add(l, q, recv.numel() / (2 * q.k));
      TESSERA_CHECK(bad.block < 0, "topk_scatter_add: block ", bad.block, " (rank ", bad.block,
                    " of the group) holds index ", bad.index, " outside the bucket of ", q.n,
                    " elements: a corrupted pair buffer");
      return;
    }
    case OpKind::TopKResidual: {
      const core::Tensor& sent = c.input("sent");
      TopKResidualParams<T> q{};
      q.sent = flat_data<const I>(sent);
      q.acc = flat_data<T>(c.output("acc"));
      q.residual = flat_data<T>(c.output("residual"));
      q.inv_scale = static_cast<T>(c.scalar("inv_scale"));
      q.n = c.output("acc").numel();
      q.k = sent.numel() / 2;
      const TopKBadIndex bad = run_topk_residual(l, q);
      TESSERA_CHECK(bad.block < 0, "topk_residual: sent index ", bad.index,
                    " outside the bucket of ", q.n, " elements");
      return;
    }
    default:
      TESSERA_ASSERT(false, op_name(c.kind), " is not a top-k op");
  }
}

/// Calls body(E{}) with E the kernel element type of float dtype dt (float, double, Bf16, F16).
template <class Body>
void by_float(core::DType dt, const core::Tensor& t, Body&& body) {
  switch (dt) {
    case core::DType::F32:
      return body(float{});
    case core::DType::F64:
      return body(double{});
    case core::DType::BF16:
      return body(Bf16{});
    case core::DType::F16:
      return body(F16{});
    default:
      throw Unsupported(tessera::detail::cat("cuda kernels: tensor ", t.describe(),
                                             " has no float dtype (f32, f64, bf16, f16)"));
  }
}

/// copy: y = x converted, any pair of float dtypes.
template <class L, class T>
void run_copy_op(L& l, const OpCall& c) {
  const core::Tensor& y = c.output("y");
  by_float(y.dtype(), y, [&](auto d) {
    using D = std::remove_cvref_t<decltype(d)>;
    run_copy(l, CopyParams<T, D>{in<T>(c, "x"), make_view<D>(y)});
  });
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
    case OpKind::TopKSelect:
    case OpKind::TopKScatterAdd:
    case OpKind::TopKResidual:
      return run_topk<L, T>(l, c);
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

/// dst = src converted to dst's dtype (any two float dtypes, one shape, any strides, stride 0 in
/// src too: a broadcast): the weight rounded to a call's 16-bit dtype, a 16-bit result widened
/// into f32. Rounds to nearest even by core/half.hpp (kernels/half.hpp).
template <class L>
void run_tensor_convert(L& launcher, const core::Tensor& src, core::Tensor& dst) {
  TESSERA_CHECK(src.shape() == dst.shape(), "cuda kernels: conversion of ", src.describe(),
                " into ", dst.describe(), " needs one shape");
  if (src.is_meta() || dst.is_meta() || dst.numel() == 0) return;
  detail_dispatch::by_float(src.dtype(), src, [&](auto s) {
    using S = std::remove_cvref_t<decltype(s)>;
    detail_dispatch::by_float(dst.dtype(), dst, [&](auto d) {
      using D = std::remove_cvref_t<decltype(d)>;
      run_copy(launcher, CopyParams<S, D>{make_view<const S>(src), make_view<D>(dst)});
    });
  });
}

namespace detail_dispatch {

/// True when no Master-slot tensor of the call is 16-bit (each is f32, or absent).
inline bool masters_are_f32(const OpCall& c) {
  const OpSpec& s = op_spec(c.kind);
  for (int i = 0; i < kMaxOpInputs; ++i)
    if (c.in[i] && s.inputs[i].type == SlotType::Master && c.in[i]->dtype() != core::DType::F32)
      return false;
  for (int j = 0; j < kMaxOpOutputs; ++j)
    if (c.out[j] && s.outputs[j].type == SlotType::Master && c.out[j]->dtype() != core::DType::F32)
      return false;
  return true;
}

/// The ops whose bodies load and store 16-bit elements themselves (H = Bf16/F16 storage, f32
/// compute, f32 Master slots): the elementwise ops, layernorm and scale_channels, the bulk of a
/// ConvNeXt block's own-kernel traffic. Same bits as run_widened (each load widens exactly, the
/// f32 arithmetic is the f32 body's, each store rounds once), without its extra passes and
/// scratch. False (nothing run) for other ops or a call with a 16-bit Master tensor.
template <class L, class H>
bool run_native_half(L& l, const OpCall& c) {
  using T = float;
  if (!masters_are_f32(c)) return false;
  switch (c.kind) {
    case OpKind::LayerNormForward:
      run_layernorm_forward(
          l, LayerNormForwardParams<T, H>{in<H>(c, "x"), in<T>(c, "gamma"), in<T>(c, "beta"),
                                          out<H>(c, "y"), out<T>(c, "mean"), out<T>(c, "rstd"),
                                          c.scalar("eps"), 0, 0});
      return true;
    case OpKind::LayerNormBackward:
      run_layernorm_backward(l, LayerNormBackwardParams<T, H>{
                                    in<H>(c, "dy"), in<H>(c, "x"), in<T>(c, "gamma"),
                                    in<T>(c, "mean"), in<T>(c, "rstd"), out<H>(c, "dx"),
                                    out<T>(c, "dgamma"), out<T>(c, "dbeta"), c.accumulate, 0, 0});
      return true;
    case OpKind::ActivationForward:
      run_activation_forward(
          l, ActForwardParams<T, H>{in<H>(c, "x"), out<H>(c, "y"), Act(int(c.act))});
      return true;
    case OpKind::ActivationBackward:
      run_activation_backward(l, ActBackwardParams<T, H>{in<H>(c, "dy"), in<H>(c, "saved"),
                                                         out<H>(c, "dx"), Act(int(c.act))});
      return true;
    case OpKind::ScaleChannels:
      run_scale_channels(
          l, ScaleChannelsParams<T, H>{in<H>(c, "x"), in<T>(c, "s"), out<H>(c, "y"), {}});
      return true;
    case OpKind::ScaleChannelsBackward:
      run_scale_channels_backward(
          l, ScaleChannelsBackwardParams<T, H>{in<H>(c, "dy"), in<H>(c, "x"), in<T>(c, "s"),
                                               out_if<H>(c, "dx"), out<T>(c, "ds"), c.accumulate});
      return true;
    case OpKind::Add:
      run_add(l, AddParams<T, H>{in<H>(c, "a"), in<H>(c, "b"), out<H>(c, "y")});
      return true;
    case OpKind::Axpy:
      run_axpy(l, AxpyParams<T, H>{in<H>(c, "x"), out<H>(c, "y"), T(c.scalar("alpha"))});
      return true;
    case OpKind::Scale:
      run_scale(l, ScaleParams<T, H>{out<H>(c, "y"), T(c.scalar("alpha"))});
      return true;
    case OpKind::ScaleSamples:
      run_scale_samples(l,
                        ScaleSamplesParams<T, H>{in<H>(c, "x"), in<T>(c, "s"), out<H>(c, "y"), 0});
      return true;
    default:
      return false;
  }
}

/// A bf16/f16 call on the f32 bodies: each 16-bit tensor of the call (its Float slots and its
/// 16-bit Master slots) is widened into an f32 scratch tensor of the launcher (exact), the f32 op
/// runs on the widened call, and each 16-bit output is rounded back once. An output the op reads
/// (accumulate, in-place updates) is widened first; one it only writes is not. f32 Master tensors
/// and the F64/I64 slots are used as they are. So a result is the f32 kernel's, rounded once: the
/// bound of the f32 kernel plus u·|y| (u = unit_roundoff of the dtype), as on the cpu backend.
/// Costs on the GPU, per 16-bit tensor, one widening pass (and one rounding pass per output) and
/// its f32 scratch (booked as Workspace while the op runs).
template <class L>
void run_widened(L& l, const OpCall& c, std::string_view who) {
  const OpSpec& spec = op_spec(c.kind);
  OpCall w = c;
  std::array<core::Tensor, kMaxOpInputs + kMaxOpOutputs> scratch;
  int used = 0;
  auto widened = [&](const core::Tensor& t, bool read) -> core::Tensor* {
    core::Tensor& s = scratch[static_cast<std::size_t>(used++)];
    s = l.scratch(t.shape(), core::DType::F32);
    if (read) run_tensor_convert(l, t, s);
    return &s;
  };
  for (int i = 0; i < kMaxOpInputs; ++i)
    if (c.in[i] && core::dtype_is_half(c.in[i]->dtype())) w.in[i] = widened(*c.in[i], true);
  const bool reads_outputs = c.accumulate || spec.updates_outputs;
  for (int j = 0; j < kMaxOpOutputs; ++j)
    if (c.out[j] && core::dtype_is_half(c.out[j]->dtype()))
      w.out[j] = widened(*c.out[j], reads_outputs);
  run_typed<L, float>(l, w, who);
  for (int j = 0; j < kMaxOpOutputs; ++j)
    if (w.out[j] != c.out[j]) run_tensor_convert(l, *w.out[j], *c.out[j]);
}

}  // namespace detail_dispatch

/// Runs `call` on `launcher` (see pass.hpp for the launcher concept). `who` names the backend in
/// errors. f32 and f64 calls run their bodies in their dtype; bf16/f16 calls load and store 16
/// bits in the bodies where they can (run_native_half), else run the f32 bodies on widened copies
/// (run_widened); copy converts directly. Throws Unsupported for the convolutions
/// and linear ops (library calls of the cuda backend); InvalidArgument for a label ≥ K of
/// softmax_cross_entropy (before anything is written).
template <class L>
void run_kernel_op(L& launcher, const OpCall& call, std::string_view who = "cuda") {
  const core::Tensor* lead = float_lead(call);
  TESSERA_ASSERT(lead != nullptr, op_name(call.kind), " call without a float tensor");
  const core::DType dt = lead->dtype();
  if (call.kind == OpKind::Copy)
    return detail_dispatch::by_float(dt, *lead, [&](auto e) {
      detail_dispatch::run_copy_op<L, std::remove_cvref_t<decltype(e)>>(launcher, call);
    });
  if (dt == core::DType::F32) return detail_dispatch::run_typed<L, float>(launcher, call, who);
  if (dt == core::DType::F64) return detail_dispatch::run_typed<L, double>(launcher, call, who);
  if (dt == core::DType::BF16 && detail_dispatch::run_native_half<L, Bf16>(launcher, call)) return;
  if (dt == core::DType::F16 && detail_dispatch::run_native_half<L, F16>(launcher, call)) return;
  if (core::dtype_is_half(dt)) return detail_dispatch::run_widened(launcher, call, who);
  throw Unsupported(tessera::detail::cat(who, " ", op_name(call.kind), ": dtype ",
                                         core::dtype_name(dt), " of ", lead->describe(),
                                         " has no kernel (f32, f64, bf16, f16)"));
}

/// dst = src element by element (same shape and dtype, any dtype, any strides; bitwise): core's
/// Tensor::copy_from and the halo pack/unpack of strided slabs. A no-op when either is meta.
template <class L>
void run_tensor_copy(L& launcher, const core::Tensor& src, core::Tensor& dst) {
  TESSERA_CHECK(src.shape() == dst.shape() && src.dtype() == dst.dtype(), "cuda kernels: copy of ",
                src.describe(), " into ", dst.describe(), " needs one shape and dtype");
  if (src.is_meta() || dst.is_meta() || dst.numel() == 0) return;
  detail_dispatch::by_word(core::dtype_size(dst.dtype()), dst, [&](auto w) {
    using W = std::remove_cvref_t<decltype(w)>;
    run_copy(launcher, CopyParams<W, W>{make_raw_view<const W>(src), make_raw_view<W>(dst)});
  });
}

/// dst += src (same shape, any strides): one float dtype, or a 16-bit src added into an f32 dst
/// (the widening add of a weight gradient); computed in f32/f64, rounded once into dst. Core's
/// Tensor::add_from and the library paths' accumulation.
template <class L>
void run_tensor_add(L& launcher, const core::Tensor& src, core::Tensor& dst) {
  const bool widening = core::dtype_is_half(src.dtype()) && dst.dtype() == core::DType::F32;
  TESSERA_CHECK(src.shape() == dst.shape() && (src.dtype() == dst.dtype() || widening),
                "cuda kernels: add of ", src.describe(), " into ", dst.describe(),
                " needs one shape and one dtype (or a bf16/f16 source added into f32)");
  if (src.is_meta() || dst.is_meta() || dst.numel() == 0) return;
  detail_dispatch::by_float(src.dtype(), src, [&](auto s) {
    using S = std::remove_cvref_t<decltype(s)>;
    detail_dispatch::by_float(dst.dtype(), dst, [&](auto d) {
      using D = std::remove_cvref_t<decltype(d)>;
      if constexpr (std::is_same_v<S, D> || (kIsHalf<S> && std::is_same_v<D, float>))
        run_add_into(launcher, AddIntoParams<D, S>{make_view<const S>(src), make_view<D>(dst)});
    });
  });
}

/// Every element of t = value (f32, f64; bf16/f16: value rounded by half.hpp), or zero (any
/// dtype, value 0): core's Tensor::fill.
template <class L>
void run_tensor_fill(L& launcher, core::Tensor& t, double value) {
  if (t.is_meta() || t.numel() == 0) return;
  if (core::dtype_is_float(t.dtype()) || core::dtype_is_half(t.dtype()))
    return detail_dispatch::by_float(t.dtype(), t, [&](auto e) {
      using E = std::remove_cvref_t<decltype(e)>;
      run_fill(launcher, FillParams<E>{make_view<E>(t), convert<E>(value)});
    });
  if (value == 0.0)
    return detail_dispatch::by_word(core::dtype_size(t.dtype()), t, [&](auto w) {
      using W = std::remove_cvref_t<decltype(w)>;
      run_fill(launcher, FillParams<W>{make_raw_view<W>(t), W{0}});
    });
  throw Unsupported(tessera::detail::cat("cuda kernels: fill of ", t.describe(), " with ", value,
                                         " is not supported (float dtypes take any value, other "
                                         "dtypes 0)"));
}

}  // namespace tessera::compute::cuda::kernels
