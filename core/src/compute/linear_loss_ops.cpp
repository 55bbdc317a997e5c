// Linear layers and the loss: op table entries and typed entry points of linear_forward,
// linear_backward and softmax_cross_entropy.
#include "op_entries.hpp"

namespace tessera::compute {

using core::DType;
using core::Tensor;
using namespace entries;

namespace entries {

const OpSpec kLinearForward{
    .inputs = {slot("x"), master_slot("w"), optional_master_slot("bias")},  // x (M,K), w (N,K), bias (N)
    .outputs = {slot("y")},                                    // y (M,N)
    .flops = [](const OpCall& c) {
      const Tensor& x = c.input("x");
      const double m = static_cast<double>(x.size(0)), k = static_cast<double>(x.size(1));
      const double n = static_cast<double>(c.input("w").size(0));
      return 2 * m * n * k + (c.input_if("bias") ? m * n : 0);
    }};

const OpSpec kLinearBackward{
    .inputs = {slot("dy"), slot("x"), master_slot("w")},  // dy (M,N), x (M,K), w (N,K)
    .outputs = {optional_slot("dx", "x"), master_slot("dw", "w"), optional_master_slot("db")},
    .flops = [](const OpCall& c) {
      const Tensor& dy = c.input("dy");
      const double m = static_cast<double>(dy.size(0)), n = static_cast<double>(dy.size(1));
      const double k = static_cast<double>(c.input("x").size(1));
      return 2 * m * n * k + (c.output_if("dx") ? 2 * m * n * k : 0) + (c.output_if("db") ? m * n : 0);
    }};

const OpSpec kSoftmaxCrossEntropy{
    .inputs = {slot("logits"), i64_slot("labels")},  // logits (N,K,...), labels (N,...)
    .outputs = {f64_slot("loss"), slot("dlogits", "logits")},
    .scalars = {"grad_scale"},
    .flops = [](const OpCall& c) { return 6 * lead_numel(c); }};

}  // namespace entries

void linear_forward(Backend& b, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  const char* op = "linear_forward";
  TESSERA_CHECK(x.ndim() == 2 && w.ndim() == 2 && y.ndim() == 2, op, ": x ", x.describe(), ", w ",
                w.describe(), ", y ", y.describe(), " must be matrices");
  TESSERA_CHECK(w.size(1) == x.size(1), op, ": x ", x.describe(), " has ", x.size(1),
                " features but w ", w.describe(), " expects ", w.size(1));
  TESSERA_CHECK(y.size(0) == x.size(0) && y.size(1) == w.size(0), op, ": y ", y.describe(),
                " should be [", x.size(0), ",", w.size(0), "]");
  is_float(op, x);
  const Tensor* bp = present(bias);
  if (bp) channel_vector(op, "bias", *bp, w.size(0));
  submit(b, {.kind = OpKind::LinearForward, .in = {&x, &w, bp}, .out = {&y}});
}

void linear_backward(Backend& b, const Tensor& dy, const Tensor& x, const Tensor& w, Tensor* dx,
                     Tensor& dw, Tensor* db, bool accumulate) {
  const char* op = "linear_backward";
  TESSERA_CHECK(dy.ndim() == 2 && x.ndim() == 2 && w.ndim() == 2 && dy.size(0) == x.size(0) &&
                    dy.size(1) == w.size(0) && w.size(1) == x.size(1),
                op, ": dy ", dy.describe(), ", x ", x.describe(), ", w ", w.describe(), " do not match");
  if (present(db)) channel_vector(op, "db", *db, w.size(0));
  is_float(op, x);
  submit(b, {.kind = OpKind::LinearBackward, .in = {&dy, &x, &w}, .out = {present(dx), &dw, present(db)},
             .accumulate = accumulate});
}

void softmax_cross_entropy(Backend& b, const Tensor& logits, const Tensor& labels, double grad_scale,
                           Tensor& loss, Tensor& dlogits) {
  const char* op = "softmax_cross_entropy";
  TESSERA_CHECK(logits.ndim() == 2 || logits.ndim() == 4, op, ": logits ", logits.describe(),
                " must be [N,K] or [N,K,H,W]");
  TESSERA_CHECK(labels.dtype() == DType::I64 && labels.shape() == without_dim1(logits.shape()), op,
                ": labels ", labels.describe(), " must be i64", core::shape_str(without_dim1(logits.shape())));
  is_f64_vector(op, "loss", loss, 1);
  is_float(op, logits);
  submit(b, {.kind = OpKind::SoftmaxCrossEntropy, .in = {&logits, &labels}, .out = {&loss, &dlogits},
             .scalars = {grad_scale}});
}

}  // namespace tessera::compute
