// The convolutions' op table entries and typed entry points: forward, data gradient, weight
// gradient (NCHW, any window of outputs; see Conv2dParams).
//
// FLOPs count a multiply-add as 2 and every tap of the (padded) window, as vendor libraries do.
#include "op_entries.hpp"

namespace tessera::compute {

using core::Tensor;

namespace {

// 2 × the multiply-adds: every output-shaped element times the weight's taps per output.
double conv_flops(const OpCall& c) {
  const Tensor& w = conv_weight(c);
  const double macs = entries::numel(&conv_output(c)) * static_cast<double>(w.size(1)) * w.size(2) * w.size(3);
  return 2 * macs;
}

// N·C·H of `rows` (the output-shaped tensor, or dx of the data gradient).
double rows_of(const Tensor& rows) {
  return rows.ndim() == 4 && rows.size(3) > 0 ? entries::numel(&rows) / static_cast<double>(rows.size(3)) : 0.0;
}

}  // namespace

namespace entries {

const OpSpec kConv2dForward{
    .inputs = {slot("x"), master_slot("w"), optional_master_slot("bias")},
    .outputs = {slot("y")},
    .flops = [](const OpCall& c) { return conv_flops(c) + (c.input_if("bias") ? numel(&c.output("y")) : 0); },
    .rows = [](const OpCall& c) { return rows_of(c.output("y")); }};

const OpSpec kConv2dBackwardData{
    .inputs = {slot("dy"), master_slot("w")},
    .outputs = {slot("dx")},
    .flops = conv_flops,
    .rows = [](const OpCall& c) { return rows_of(c.output("dx")); }};

const OpSpec kConv2dBackwardWeight{
    .inputs = {slot("x"), slot("dy")},
    .outputs = {master_slot("dw"), optional_master_slot("db")},
    .flops = [](const OpCall& c) { return conv_flops(c) + (c.output_if("db") ? numel(&c.input("dy")) : 0); },
    .rows = [](const OpCall& c) { return rows_of(c.input("dy")); }};

}  // namespace entries

using entries::present;
using entries::submit;

void conv2d_forward(Backend& b, const Conv2dParams& p, const Tensor& x, const Tensor& w,
                    const Tensor* bias, Tensor& y) {
  const Tensor* bp = present(bias);
  check_conv2d_shapes("conv2d_forward", p, x, w, bp, y);
  submit(b, {.kind = OpKind::Conv2dForward, .in = {&x, &w, bp}, .out = {&y}, .conv = p});
}

void conv2d_backward_data(Backend& b, const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                          Tensor& dx, bool accumulate) {
  check_conv2d_shapes("conv2d_backward_data", p, dx, w, nullptr, dy);
  submit(b, {.kind = OpKind::Conv2dBackwardData, .in = {&dy, &w}, .out = {&dx}, .conv = p, .accumulate = accumulate});
}

void conv2d_backward_weight(Backend& b, const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                            Tensor& dw, Tensor* db, bool accumulate) {
  Tensor* dbp = present(db);
  check_conv2d_shapes("conv2d_backward_weight", p, x, dw, dbp, dy);
  submit(b, {.kind = OpKind::Conv2dBackwardWeight, .in = {&x, &dy}, .out = {&dw, dbp}, .conv = p,
             .accumulate = accumulate});
}

}  // namespace tessera::compute
