// The normalisations: op table entries and typed entry points of layer norm (over dim 1 for every
// other index) and of batch norm's three kernels (statistics, normalise, backward).
#include "op_entries.hpp"

namespace tessera::compute {

using core::Tensor;
using namespace entries;

namespace entries {

const OpSpec kLayerNormForward{
    .inputs = {slot("x"), master_slot("gamma"), master_slot("beta")},
    .outputs = {slot("y", "x"), master_slot("mean"), master_slot("rstd")},
    .scalars = {"eps"},
    .flops = [](const OpCall& c) { return 8 * lead_numel(c); }};  // mean, variance, normalise, scale, shift

const OpSpec kLayerNormBackward{
    .inputs = {slot("dy", "x"), slot("x"), master_slot("gamma"), master_slot("mean"), master_slot("rstd")},
    .outputs = {slot("dx", "x"), master_slot("dgamma"), master_slot("dbeta")},
    .flops = [](const OpCall& c) { return 14 * lead_numel(c); }};  // two reductions, dx, dgamma/dbeta

const OpSpec kChannelMoments{
    .inputs = {slot("x")},
    .outputs = {f64_slot("sum"), f64_slot("sumsq")},
    .flops = [](const OpCall& c) { return 3 * lead_numel(c); }};

const OpSpec kBatchNormForward{
    .inputs = {slot("x"), master_slot("mean"), master_slot("rstd"), master_slot("gamma"), master_slot("beta")},
    .outputs = {slot("y", "x")},
    .flops = [](const OpCall& c) { return 4 * lead_numel(c); }};

const OpSpec kBatchNormBackwardReduce{
    .inputs = {slot("dy", "x"), slot("x"), master_slot("mean"), master_slot("rstd")},
    .outputs = {f64_slot("sum_dy"), f64_slot("sum_dy_xhat")},
    .flops = [](const OpCall& c) { return 5 * lead_numel(c); }};

const OpSpec kBatchNormBackwardData{
    .inputs = {slot("dy", "x"), slot("x"), master_slot("mean"), master_slot("rstd"), master_slot("gamma"), f64_slot("sum_dy"),
               f64_slot("sum_dy_xhat")},
    .outputs = {slot("dx", "x")},
    .scalars = {"count"},
    .flops = [](const OpCall& c) { return 7 * lead_numel(c); }};

}  // namespace entries

namespace {
void stats_shape(const char* op, const Tensor& x, const Tensor& mean, const Tensor& rstd) {
  TESSERA_CHECK(mean.shape() == without_dim1(x.shape()) && rstd.shape() == mean.shape(), op, ": mean ",
                mean.describe(), " and rstd ", rstd.describe(), " must have shape ",
                core::shape_str(without_dim1(x.shape())));
}
}  // namespace

void layernorm_forward(Backend& b, const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                       Tensor& y, Tensor& mean, Tensor& rstd) {
  const char* op = "layernorm_forward";
  TESSERA_CHECK(x.ndim() >= 2, op, ": input ", x.describe(), " needs a channel dimension (dim 1)");
  is_float(op, x);
  channel_vector(op, "gamma", gamma, x.size(1));
  channel_vector(op, "beta", beta, x.size(1));
  stats_shape(op, x, mean, rstd);
  TESSERA_CHECK(eps > 0, op, ": eps ", eps, " must be positive");
  submit(b, {.kind = OpKind::LayerNormForward, .in = {&x, &gamma, &beta}, .out = {&y, &mean, &rstd},
             .scalars = {eps}});
}

void layernorm_backward(Backend& b, const Tensor& dy, const Tensor& x, const Tensor& gamma,
                        const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                        bool accumulate) {
  const char* op = "layernorm_backward";
  TESSERA_CHECK(x.ndim() >= 2, op, ": input ", x.describe(), " needs a channel dimension (dim 1)");
  channel_vector(op, "gamma", gamma, x.size(1));
  channel_vector(op, "dgamma", dgamma, x.size(1));
  channel_vector(op, "dbeta", dbeta, x.size(1));
  stats_shape(op, x, mean, rstd);
  submit(b, {.kind = OpKind::LayerNormBackward, .in = {&dy, &x, &gamma, &mean, &rstd},
             .out = {&dx, &dgamma, &dbeta}, .accumulate = accumulate});
}

void channel_moments(Backend& b, const Tensor& x, Tensor& sum, Tensor& sumsq) {
  const char* op = "channel_moments";
  TESSERA_CHECK(x.ndim() >= 2, op, ": input ", x.describe(), " needs a channel dimension");
  is_float(op, x);
  is_f64_vector(op, "sum", sum, x.size(1));
  is_f64_vector(op, "sumsq", sumsq, x.size(1));
  submit(b, {.kind = OpKind::ChannelMoments, .in = {&x}, .out = {&sum, &sumsq}});
}

void batchnorm_forward(Backend& b, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                       const Tensor& gamma, const Tensor& beta, Tensor& y) {
  const char* op = "batchnorm_forward";
  TESSERA_CHECK(x.ndim() >= 2, op, ": input ", x.describe(), " needs a channel dimension");
  is_float(op, x);
  for (const Tensor* t : {&mean, &rstd, &gamma, &beta}) channel_vector(op, "statistic", *t, x.size(1));
  submit(b, {.kind = OpKind::BatchNormForward, .in = {&x, &mean, &rstd, &gamma, &beta}, .out = {&y}});
}

void batchnorm_backward_reduce(Backend& b, const Tensor& dy, const Tensor& x, const Tensor& mean,
                               const Tensor& rstd, Tensor& sum_dy, Tensor& sum_dy_xhat) {
  const char* op = "batchnorm_backward_reduce";
  TESSERA_CHECK(x.ndim() >= 2, op, ": input ", x.describe(), " needs a channel dimension");
  channel_vector(op, "mean", mean, x.size(1));
  channel_vector(op, "rstd", rstd, x.size(1));
  is_f64_vector(op, "sum_dy", sum_dy, x.size(1));
  is_f64_vector(op, "sum_dy_xhat", sum_dy_xhat, x.size(1));
  submit(b, {.kind = OpKind::BatchNormBackwardReduce, .in = {&dy, &x, &mean, &rstd}, .out = {&sum_dy, &sum_dy_xhat}});
}

void batchnorm_backward_data(Backend& b, const Tensor& dy, const Tensor& x, const Tensor& mean,
                             const Tensor& rstd, const Tensor& gamma, const Tensor& sum_dy,
                             const Tensor& sum_dy_xhat, double count, Tensor& dx) {
  const char* op = "batchnorm_backward_data";
  TESSERA_CHECK(x.ndim() >= 2, op, ": input ", x.describe(), " needs a channel dimension");
  for (const Tensor* t : {&mean, &rstd, &gamma}) channel_vector(op, "statistic", *t, x.size(1));
  is_f64_vector(op, "sum_dy", sum_dy, x.size(1));
  is_f64_vector(op, "sum_dy_xhat", sum_dy_xhat, x.size(1));
  TESSERA_CHECK(count > 0, op, ": count ", count, " must be positive");
  submit(b, {.kind = OpKind::BatchNormBackwardData, .in = {&dy, &x, &mean, &rstd, &gamma, &sum_dy, &sum_dy_xhat},
             .out = {&dx}, .scalars = {count}});
}

}  // namespace tessera::compute
