// Top-k gradient compression's kernels: op table entries and typed entry points of topk_select,
// topk_scatter_add and topk_residual (nn/grad_compression.hpp says the scheme; the trainer's
// TopKCompressor calls them, so traces and the simulator see them as kernels like any other).
#include <algorithm>
#include <cmath>
#include <utility>

#include "op_entries.hpp"

namespace tessera::compute {

using core::Tensor;
using namespace entries;

namespace entries {

// FLOPs per element: the accumulate (2), its magnitude key, nth_element's expected ~2 comparisons
// over the keys, and the scan's key and comparison. The rates per class come from calibration
// (sim/src/calibrate_cases.cpp).
const OpSpec kTopKSelect{
    .inputs = {slot("grad"), slot("residual", "grad")},
    .outputs = {slot("acc", "grad"), index_slot("order", "grad"), index_slot("pairs")},
    .scalars = {"scale"},
    .integers = {"k"},
    .flops = [](const OpCall& c) { return 6 * lead_numel(c); }};

const OpSpec kTopKScatterAdd{
    .inputs = {index_slot("recv")},
    .outputs = {slot("grad")},
    .integers = {"k"},
    .flops = [](const OpCall& c) { return numel(c.out[0]) + numel(c.in[0]) / 2; }};  // the zero fill, the adds

const OpSpec kTopKResidual{
    .inputs = {index_slot("sent")},
    .outputs = {slot("acc"), slot("residual", "acc")},
    .scalars = {"inv_scale"},
    .updates_outputs = true,
    .flops = [](const OpCall& c) { return numel(c.out[0]); }};

}  // namespace entries

namespace {

void flat(const char* op, const char* what, const Tensor& t) {
  contiguous(op, what, t);
  TESSERA_CHECK(t.ndim() == 1, op, ": ", what, " ", t.describe(), " must be a vector (a flat bucket)");
}

}  // namespace

void topk_select(Backend& b, const Tensor& grad, const Tensor& residual, double scale, std::int64_t k, Tensor& acc,
                 Tensor& order, Tensor& pairs) {
  for (auto [what, t] : {std::pair<const char*, const Tensor*>{"grad", &grad}, {"residual", &residual},
                         {"acc", &acc}, {"order", &order}, {"pairs", &pairs}})
    flat("topk_select", what, *t);
  const std::int64_t n = grad.numel();
  TESSERA_CHECK(k >= 1 && k <= n, "topk_select: k = ", k, " must be in [1, ", n, "] for a bucket of ", n,
                " elements");
  TESSERA_CHECK(pairs.numel() == 2 * k, "topk_select: pairs ", pairs.describe(), " must have 2k = ", 2 * k,
                " slots (k indices, then their values)");
  TESSERA_CHECK(std::isfinite(scale), "topk_select: scale ", scale, " must be finite");
  submit(b, {.kind = OpKind::TopKSelect, .in = {&grad, &residual}, .out = {&acc, &order, &pairs},
             .scalars = {scale}, .integers = {k}});
}

void topk_scatter_add(Backend& b, const Tensor& recv, std::int64_t k, Tensor& grad) {
  flat("topk_scatter_add", "recv", recv);
  flat("topk_scatter_add", "grad", grad);
  TESSERA_CHECK(k >= 1 && k <= grad.numel(), "topk_scatter_add: k = ", k, " must be in [1, ", grad.numel(), "]");
  TESSERA_CHECK(recv.numel() % (2 * k) == 0, "topk_scatter_add: recv ", recv.describe(),
                " is not a whole number of blocks of 2k = ", 2 * k, " slots");
  submit(b, {.kind = OpKind::TopKScatterAdd, .in = {&recv}, .out = {&grad}, .integers = {k}});
}

void topk_residual(Backend& b, const Tensor& sent, double inv_scale, Tensor& acc, Tensor& residual) {
  flat("topk_residual", "sent", sent);
  flat("topk_residual", "acc", acc);
  flat("topk_residual", "residual", residual);
  TESSERA_CHECK(sent.numel() % 2 == 0 && sent.numel() / 2 <= acc.numel(), "topk_residual: sent ", sent.describe(),
                " must hold 2k slots with k <= ", acc.numel());
  TESSERA_CHECK(std::isfinite(inv_scale), "topk_residual: inv_scale ", inv_scale, " must be finite");
  submit(b, {.kind = OpKind::TopKResidual, .in = {&sent}, .out = {&acc, &residual}, .scalars = {inv_scale}});
}

}  // namespace tessera::compute
