// The pointwise and per-channel ops: op table entries and typed entry points of the activations,
// channel scaling, sums and broadcasts, the flat elementwise ops and nearest upsampling. They are
// memory-bound: their FLOPs count the arithmetic per element, their time comes from the bytes.
#include "op_entries.hpp"

namespace tessera::compute {

using core::Tensor;
using namespace entries;

namespace entries {

const OpSpec kActivationForward{
    .inputs = {slot("x")},
    .outputs = {slot("y", "x")},
    .flops = [](const OpCall& c) {
      return lead_numel(c) * (c.act == Activation::Relu ? 1 : c.act == Activation::Gelu ? 14 : 4);
    }};

const OpSpec kActivationBackward{
    .inputs = {slot("dy"), slot("saved", "dy")},  // saved: x for gelu, y for relu and sigmoid
    .outputs = {slot("dx", "dy")},
    .flops = [](const OpCall& c) {
      return lead_numel(c) * (c.act == Activation::Relu ? 1 : c.act == Activation::Gelu ? 18 : 3);
    }};

const OpSpec kScaleChannels{
    .inputs = {slot("x"), master_slot("s")},  // s (C) or (N,C)
    .outputs = {slot("y", "x")},
    .flops = lead_numel};

const OpSpec kScaleChannelsBackward{
    .inputs = {slot("dy", "x"), slot("x"), master_slot("s")},
    .outputs = {optional_slot("dx", "x"), master_slot("ds", "s")},
    .flops = [](const OpCall& c) { return 3 * lead_numel(c); }};

const OpSpec kChannelSum{
    .inputs = {slot("x")},          // (N,C,H,W)
    .outputs = {master_slot("y")},  // (N,C): f32 in a bf16/f16 call (a reduction)
    .flops = lead_numel};

const OpSpec kChannelBroadcast{
    .inputs = {master_slot("g")},  // (N,C): f32 in a bf16/f16 call (the gradient of channel_sum's y)
    .outputs = {slot("y")},        // (N,C,H,W)
    .scalars = {"scale"},
    .flops = [](const OpCall& c) { return numel(&c.output("y")) * (c.accumulate ? 2 : 1); }};

const OpSpec kAdd{
    .inputs = {slot("a"), slot("b", "a")},
    .outputs = {slot("y", "a")},
    .flops = lead_numel};

const OpSpec kAxpy{
    .inputs = {slot("x")},
    .outputs = {slot("y", "x")},
    .scalars = {"alpha"},
    .updates_outputs = true,
    .flops = [](const OpCall& c) { return 2 * lead_numel(c); }};

const OpSpec kScaleSamples{
    .inputs = {slot("x"), master_slot("s")},  // s (N)
    .outputs = {slot("y", "x")},
    .flops = lead_numel};

const OpSpec kUpsampleNearest{
    .inputs = {slot("x")},
    .outputs = {slot("y")},
    .integers = {"factor"}};

const OpSpec kUpsampleNearestBackward{
    .inputs = {slot("dy")},
    .outputs = {slot("dx")},
    .integers = {"factor"},
    .flops = lead_numel};

const OpSpec kCopy{
    .inputs = {slot("x")},
    .outputs = {any_float_slot("y", "x")}};  // no arithmetic: bytes only

const OpSpec kScale{
    .outputs = {slot("y")},
    .scalars = {"alpha"},
    .updates_outputs = true,
    .flops = lead_numel};

}  // namespace entries

void activation_forward(Backend& b, Activation a, const Tensor& x, Tensor& y) {
  is_float("activation_forward", x);
  submit(b, {.kind = OpKind::ActivationForward, .in = {&x}, .out = {&y}, .act = a});
}

void activation_backward(Backend& b, Activation a, const Tensor& dy, const Tensor& saved, Tensor& dx) {
  submit(b, {.kind = OpKind::ActivationBackward, .in = {&dy, &saved}, .out = {&dx}, .act = a});
}

namespace {
void check_scale_shape(const char* op, const Tensor& x, const Tensor& s) {
  TESSERA_CHECK(x.ndim() >= 2, op, ": input ", x.describe(), " needs a channel dimension");
  const bool per_channel = s.ndim() == 1 && s.size(0) == x.size(1);
  const bool per_sample = s.ndim() == 2 && s.size(0) == x.size(0) && s.size(1) == x.size(1);
  TESSERA_CHECK(per_channel || per_sample, op, ": scale ", s.describe(), " must be [", x.size(1),
                "] or [", x.size(0), ",", x.size(1), "] for input ", x.describe());
}
}  // namespace

void scale_channels(Backend& b, const Tensor& x, const Tensor& s, Tensor& y) {
  check_scale_shape("scale_channels", x, s);
  submit(b, {.kind = OpKind::ScaleChannels, .in = {&x, &s}, .out = {&y}});
}

void scale_channels_backward(Backend& b, const Tensor& dy, const Tensor& x, const Tensor& s, Tensor* dx,
                             Tensor& ds, bool accumulate) {
  check_scale_shape("scale_channels_backward", x, s);
  submit(b, {.kind = OpKind::ScaleChannelsBackward, .in = {&dy, &x, &s}, .out = {present(dx), &ds},
             .accumulate = accumulate});
}

void channel_sum(Backend& b, const Tensor& x, Tensor& y) {
  TESSERA_CHECK(x.ndim() == 4 && y.ndim() == 2 && y.size(0) == x.size(0) && y.size(1) == x.size(1),
                "channel_sum: x ", x.describe(), " must be 4-d and y ", y.describe(), " [N,C]");
  submit(b, {.kind = OpKind::ChannelSum, .in = {&x}, .out = {&y}});
}

void channel_broadcast(Backend& b, const Tensor& g, double scale_by, Tensor& y, bool accumulate) {
  TESSERA_CHECK(y.ndim() == 4 && g.ndim() == 2 && g.size(0) == y.size(0) && g.size(1) == y.size(1),
                "channel_broadcast: g ", g.describe(), " must be [N,C] of y ", y.describe());
  submit(b, {.kind = OpKind::ChannelBroadcast, .in = {&g}, .out = {&y}, .scalars = {scale_by},
             .accumulate = accumulate});
}

void add(Backend& b, const Tensor& a, const Tensor& c, Tensor& y) {
  submit(b, {.kind = OpKind::Add, .in = {&a, &c}, .out = {&y}});
}

void axpy(Backend& b, double alpha, const Tensor& x, Tensor& y) {
  submit(b, {.kind = OpKind::Axpy, .in = {&x}, .out = {&y}, .scalars = {alpha}});
}

void scale(Backend& b, double alpha, Tensor& y) {
  contiguous("scale", "y", y);
  submit(b, {.kind = OpKind::Scale, .out = {&y}, .scalars = {alpha}});
}

void scale_samples(Backend& b, const Tensor& x, const Tensor& s, Tensor& y) {
  TESSERA_CHECK(x.ndim() >= 1 && s.ndim() == 1 && s.size(0) == x.size(0), "scale_samples: s ", s.describe(),
                " must have one entry per sample of ", x.describe());
  submit(b, {.kind = OpKind::ScaleSamples, .in = {&x, &s}, .out = {&y}});
}

void copy(Backend& b, const Tensor& x, Tensor& y) {
  submit(b, {.kind = OpKind::Copy, .in = {&x}, .out = {&y}});
}

void upsample_nearest(Backend& b, const Tensor& x, int factor, Tensor& y) {
  TESSERA_CHECK(factor >= 1 && x.ndim() == 4 && y.ndim() == 4 && y.size(0) == x.size(0) &&
                    y.size(1) == x.size(1) && y.size(2) == x.size(2) * factor && y.size(3) == x.size(3) * factor,
                "upsample_nearest: y ", y.describe(), " is not x ", x.describe(), " upsampled by ", factor);
  submit(b, {.kind = OpKind::UpsampleNearest, .in = {&x}, .out = {&y}, .integers = {factor}});
}

void upsample_nearest_backward(Backend& b, const Tensor& dy, int factor, Tensor& dx) {
  TESSERA_CHECK(factor >= 1 && dx.ndim() == 4 && dy.ndim() == 4 && dy.size(2) == dx.size(2) * factor &&
                    dy.size(3) == dx.size(3) * factor,
                "upsample_nearest_backward: dy ", dy.describe(), " is not dx ", dx.describe(), " upsampled by ",
                factor);
  submit(b, {.kind = OpKind::UpsampleNearestBackward, .in = {&dy}, .out = {&dx}, .integers = {factor}});
}

}  // namespace tessera::compute
