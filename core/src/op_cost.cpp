// op_cost: FLOPs and bytes of every compute op from its shapes — the one formula the runtime's
// traces and the simulator's time model share.
//
// FLOPs count a multiply-add as 2. Convolutions and GEMMs count every tap of the (padded) window,
// as vendor libraries do. Elementwise kernels count the arithmetic per element listed in
// kElementwiseFlops; they are memory-bound, so their time comes from the bytes anyway.
#include "tessera/compute/ops.hpp"

namespace tessera::compute {

namespace {

double numel(const core::Tensor* t) { return t ? static_cast<double>(t->numel()) : 0.0; }

// Arithmetic per element of the elementwise kernels (per output element unless noted).
double elementwise_flops(const OpCall& c) {
  const double n = numel(c.in[0] ? c.in[0] : c.out[0]);
  switch (c.kind) {
    case OpKind::LayerNormForward: return 8 * n;    // mean, variance, normalise, scale, shift
    case OpKind::LayerNormBackward: return 14 * n;  // two reductions + the dx formula + dgamma/dbeta
    case OpKind::ActivationForward:
      return n * (c.act == Activation::Relu ? 1 : c.act == Activation::Gelu ? 14 : 4);
    case OpKind::ActivationBackward:
      return n * (c.act == Activation::Relu ? 1 : c.act == Activation::Gelu ? 18 : 3);
    case OpKind::ChannelMoments: return 3 * n;
    case OpKind::BatchNormForward: return 4 * n;
    case OpKind::BatchNormBackwardReduce: return 5 * n;
    case OpKind::BatchNormBackwardData: return 7 * n;
    case OpKind::ScaleChannels: return n;
    case OpKind::ScaleChannelsBackward: return 3 * n;
    case OpKind::ChannelSum: return n;
    case OpKind::ChannelBroadcast: return numel(c.out[0]) * (c.accumulate ? 2 : 1);
    case OpKind::Add: return n;
    case OpKind::Axpy: return 2 * n;
    case OpKind::Scale: return numel(c.out[0]);
    case OpKind::ScaleSamples: return n;
    case OpKind::SoftmaxCrossEntropy: return 6 * n;
    case OpKind::UpsampleNearest: return 0;
    case OpKind::UpsampleNearestBackward: return n;
    case OpKind::SgdStep: return 6 * n;
    case OpKind::AdamWStep: return 16 * n;
    case OpKind::SumSquares: return 2 * n;
    default: return 0;
  }
}

bool reads_outputs(const OpCall& c) {
  switch (c.kind) {
    case OpKind::Axpy:
    case OpKind::Scale:
    case OpKind::SgdStep:
    case OpKind::AdamWStep: return true;
    default: return c.accumulate;
  }
}

}  // namespace

OpCost op_cost(const OpCall& c) {
  OpCost cost;
  for (const core::Tensor* t : c.in)
    if (t) cost.bytes_read += static_cast<std::int64_t>(t->nbytes());
  for (const core::Tensor* t : c.out)
    if (t) cost.bytes_written += static_cast<std::int64_t>(t->nbytes());
  if (reads_outputs(c))
    for (const core::Tensor* t : c.out)
      if (t) cost.bytes_read += static_cast<std::int64_t>(t->nbytes());

  switch (c.kind) {
    case OpKind::Conv2dForward:
    case OpKind::Conv2dBackwardData:
    case OpKind::Conv2dBackwardWeight: {
      // y: the output-shaped tensor of the call; w: the weight-shaped one.
      const core::Tensor* y = c.kind == OpKind::Conv2dForward ? c.out[0] : c.in[c.kind == OpKind::Conv2dBackwardData ? 0 : 1];
      const core::Tensor* w = c.kind == OpKind::Conv2dForward ? c.in[1]
                              : c.kind == OpKind::Conv2dBackwardData ? c.in[1] : c.out[0];
      const double macs = numel(y) * static_cast<double>(w->size(1)) * w->size(2) * w->size(3);
      cost.flops = 2 * macs;
      if (c.kind == OpKind::Conv2dForward && c.in[2]) cost.flops += numel(y);
      if (c.kind == OpKind::Conv2dBackwardWeight && c.out[1]) cost.flops += numel(y);
      const core::Tensor* rows = c.kind == OpKind::Conv2dBackwardData ? c.out[0] : y;
      if (rows && rows->ndim() == 4 && rows->size(3) > 0) cost.rows = numel(rows) / static_cast<double>(rows->size(3));
      break;
    }
    case OpKind::LinearForward: {
      const double m = static_cast<double>(c.in[0]->size(0)), k = static_cast<double>(c.in[0]->size(1));
      const double n = static_cast<double>(c.in[1]->size(0));
      cost.flops = 2 * m * n * k + (c.in[2] ? m * n : 0);
      break;
    }
    case OpKind::LinearBackward: {
      const double m = static_cast<double>(c.in[0]->size(0)), n = static_cast<double>(c.in[0]->size(1));
      const double k = static_cast<double>(c.in[1]->size(1));
      cost.flops = 2 * m * n * k + (c.out[0] ? 2 * m * n * k : 0) + (c.out[2] ? m * n : 0);
      break;
    }
    default:
      cost.flops = elementwise_flops(c);
  }
  return cost;
}

}  // namespace tessera::compute
