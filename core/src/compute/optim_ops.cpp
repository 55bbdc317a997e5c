// The optimizer updates and the gradient norm: op table entries and typed entry points of
// sgd_step, adamw_step and sum_squares (contiguous tensors of one shape).
#include <initializer_list>

#include "op_entries.hpp"

namespace tessera::compute {

using core::Tensor;
using namespace entries;

namespace entries {

const OpSpec kSgdStep{
    .inputs = {slot("grad", "param")},
    .outputs = {slot("param"), slot("momentum_buf", "param")},
    .scalars = {"lr", "momentum", "weight_decay", "nesterov"},  // nesterov: 1 or 0
    .updates_outputs = true,
    .flops = [](const OpCall& c) { return 6 * lead_numel(c); }};

const OpSpec kAdamWStep{
    .inputs = {slot("grad", "param")},
    .outputs = {slot("param"), slot("m", "param"), slot("v", "param")},
    .scalars = {"lr", "beta1", "beta2", "eps", "weight_decay"},
    .integers = {"step"},
    .updates_outputs = true,
    .flops = [](const OpCall& c) { return 16 * lead_numel(c); }};

const OpSpec kSumSquares{
    .inputs = {slot("x")},
    .outputs = {f64_slot("sum")},  // (1)
    .flops = [](const OpCall& c) { return 2 * lead_numel(c); }};

}  // namespace entries

void sgd_step(Backend& b, Tensor& param, const Tensor& grad, Tensor& buf, double lr, double momentum,
              double weight_decay, bool nesterov) {
  for (const Tensor* t : std::initializer_list<const Tensor*>{&param, &grad, &buf}) contiguous("sgd_step", "tensor", *t);
  submit(b, {.kind = OpKind::SgdStep, .in = {&grad}, .out = {&param, &buf},
             .scalars = {lr, momentum, weight_decay, nesterov ? 1.0 : 0.0}});
}

void adamw_step(Backend& b, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, double lr, double beta1,
                double beta2, double eps, double weight_decay, std::int64_t step) {
  for (const Tensor* t : std::initializer_list<const Tensor*>{&param, &grad, &m, &v}) contiguous("adamw_step", "tensor", *t);
  TESSERA_CHECK(step >= 1, "adamw_step: step ", step, " must start at 1");
  submit(b, {.kind = OpKind::AdamWStep, .in = {&grad}, .out = {&param, &m, &v},
             .scalars = {lr, beta1, beta2, eps, weight_decay}, .integers = {step}});
}

void sum_squares(Backend& b, const Tensor& x, Tensor& out) {
  is_f64_vector("sum_squares", "out", out, 1);
  submit(b, {.kind = OpKind::SumSquares, .in = {&x}, .out = {&out}});
}

}  // namespace tessera::compute
