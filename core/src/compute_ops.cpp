// Typed compute entry points: argument checks, then one OpCall to Backend::execute.
#include "tessera/compute/ops.hpp"

#include <initializer_list>

#include "tessera/core/error.hpp"

namespace tessera::compute {

using core::DType;
using core::Shape;
using core::Tensor;

std::string_view activation_name(Activation a) noexcept {
  switch (a) {
    case Activation::Relu: return "relu";
    case Activation::Gelu: return "gelu";
    case Activation::Sigmoid: return "sigmoid";
  }
  return "?";
}

std::string_view op_name(OpKind k) noexcept {
  static constexpr std::string_view names[] = {
      "conv2d_forward", "conv2d_backward_data", "conv2d_backward_weight", "linear_forward",
      "linear_backward", "layernorm_forward", "layernorm_backward", "activation_forward",
      "activation_backward", "channel_moments", "batchnorm_forward", "batchnorm_backward_reduce",
      "batchnorm_backward_data", "scale_channels", "scale_channels_backward", "channel_sum",
      "channel_broadcast", "add", "axpy", "scale_samples", "softmax_cross_entropy",
      "upsample_nearest", "upsample_nearest_backward", "sgd_step", "adamw_step", "sum_squares",
      "scale"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<int>(OpKind::kCount));
  const int i = static_cast<int>(k);
  return i >= 0 && i < static_cast<int>(OpKind::kCount) ? names[i] : "?";
}

namespace {

void same_shape(const char* op, const char* an, const Tensor& a, const char* bn, const Tensor& b) {
  TESSERA_CHECK(a.shape() == b.shape(), op, ": ", an, " ", a.describe(), " and ", bn, " ",
                b.describe(), " must have the same shape");
}
void same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  TESSERA_CHECK(a.dtype() == b.dtype(), op, ": mixed dtypes ", core::dtype_name(a.dtype()), " and ",
                core::dtype_name(b.dtype()));
}
void is_float(const char* op, const Tensor& t) {
  TESSERA_CHECK(core::dtype_is_float(t.dtype()), op, ": ", t.describe(), " must be f32 or f64");
}
void is_f64_vector(const char* op, const char* what, const Tensor& t, std::int64_t n) {
  TESSERA_CHECK(t.dtype() == DType::F64 && t.ndim() == 1 && t.size(0) == n, op, ": ", what, " ",
                t.describe(), " must be f64[", n, "]");
}
void channel_vector(const char* op, const char* what, const Tensor& t, std::int64_t c, DType dt) {
  TESSERA_CHECK(t.ndim() == 1 && t.size(0) == c && t.dtype() == dt, op, ": ", what, " ", t.describe(),
                " must be ", core::dtype_name(dt), "[", c, "]");
}
Shape without_dim1(const Shape& s) {
  Shape r;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (i != 1) r.push_back(s[i]);
  return r;
}
void contiguous(const char* op, const char* what, const Tensor& t) {
  TESSERA_CHECK(t.is_contiguous(), op, ": ", what, " ", t.describe(), " must be contiguous");
}

}  // namespace

void conv2d_forward(Backend& b, const Conv2dParams& p, const Tensor& x, const Tensor& w,
                    const Tensor* bias, Tensor& y) {
  const Tensor* bp = (bias && bias->defined()) ? bias : nullptr;
  check_conv2d_shapes("conv2d_forward", p, x, w, bp, y);
  OpCall c;
  c.kind = OpKind::Conv2dForward;
  c.in = {&x, &w, bp};
  c.out = {&y};
  c.conv = p;
  b.execute(c);
}

void conv2d_backward_data(Backend& b, const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                          Tensor& dx, bool accumulate) {
  check_conv2d_shapes("conv2d_backward_data", p, dx, w, nullptr, dy);
  OpCall c;
  c.kind = OpKind::Conv2dBackwardData;
  c.in = {&dy, &w};
  c.out = {&dx};
  c.conv = p;
  c.accumulate = accumulate;
  b.execute(c);
}

void conv2d_backward_weight(Backend& b, const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                            Tensor& dw, Tensor* db, bool accumulate) {
  Tensor* dbp = (db && db->defined()) ? db : nullptr;
  check_conv2d_shapes("conv2d_backward_weight", p, x, dw, dbp, dy);
  OpCall c;
  c.kind = OpKind::Conv2dBackwardWeight;
  c.in = {&x, &dy};
  c.out = {&dw, dbp};
  c.conv = p;
  c.accumulate = accumulate;
  b.execute(c);
}

void linear_forward(Backend& b, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  const char* op = "linear_forward";
  TESSERA_CHECK(x.ndim() == 2 && w.ndim() == 2 && y.ndim() == 2, op, ": x ", x.describe(), ", w ",
                w.describe(), ", y ", y.describe(), " must be matrices");
  TESSERA_CHECK(w.size(1) == x.size(1), op, ": x ", x.describe(), " has ", x.size(1),
                " features but w ", w.describe(), " expects ", w.size(1));
  TESSERA_CHECK(y.size(0) == x.size(0) && y.size(1) == w.size(0), op, ": y ", y.describe(),
                " should be [", x.size(0), ",", w.size(0), "]");
  same_dtype(op, x, w);
  same_dtype(op, x, y);
  is_float(op, x);
  const Tensor* bp = (bias && bias->defined()) ? bias : nullptr;
  if (bp) channel_vector(op, "bias", *bp, w.size(0), x.dtype());
  OpCall c;
  c.kind = OpKind::LinearForward;
  c.in = {&x, &w, bp};
  c.out = {&y};
  b.execute(c);
}

void linear_backward(Backend& b, const Tensor& dy, const Tensor& x, const Tensor& w, Tensor* dx,
                     Tensor& dw, Tensor* db, bool accumulate) {
  const char* op = "linear_backward";
  TESSERA_CHECK(dy.ndim() == 2 && x.ndim() == 2 && w.ndim() == 2 && dy.size(0) == x.size(0) &&
                    dy.size(1) == w.size(0) && w.size(1) == x.size(1),
                op, ": dy ", dy.describe(), ", x ", x.describe(), ", w ", w.describe(), " do not match");
  same_shape(op, "dw", dw, "w", w);
  if (dx && dx->defined()) same_shape(op, "dx", *dx, "x", x);
  if (db && db->defined()) channel_vector(op, "db", *db, w.size(0), x.dtype());
  same_dtype(op, dy, x);
  same_dtype(op, dy, w);
  is_float(op, x);
  OpCall c;
  c.kind = OpKind::LinearBackward;
  c.in = {&dy, &x, &w};
  c.out = {(dx && dx->defined()) ? dx : nullptr, &dw, (db && db->defined()) ? db : nullptr};
  c.accumulate = accumulate;
  b.execute(c);
}

void layernorm_forward(Backend& b, const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                       Tensor& y, Tensor& mean, Tensor& rstd) {
  const char* op = "layernorm_forward";
  TESSERA_CHECK(x.ndim() >= 2, op, ": input ", x.describe(), " needs a channel dimension (dim 1)");
  is_float(op, x);
  channel_vector(op, "gamma", gamma, x.size(1), x.dtype());
  channel_vector(op, "beta", beta, x.size(1), x.dtype());
  same_shape(op, "y", y, "x", x);
  same_dtype(op, x, y);
  TESSERA_CHECK(mean.shape() == without_dim1(x.shape()) && rstd.shape() == mean.shape(), op, ": mean ",
                mean.describe(), " and rstd ", rstd.describe(), " must have shape ",
                core::shape_str(without_dim1(x.shape())));
  TESSERA_CHECK(eps > 0, op, ": eps ", eps, " must be positive");
  OpCall c;
  c.kind = OpKind::LayerNormForward;
  c.in = {&x, &gamma, &beta};
  c.out = {&y, &mean, &rstd};
  c.f[0] = eps;
  b.execute(c);
}

void layernorm_backward(Backend& b, const Tensor& dy, const Tensor& x, const Tensor& gamma,
                        const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                        bool accumulate) {
  const char* op = "layernorm_backward";
  same_shape(op, "dy", dy, "x", x);
  same_shape(op, "dx", dx, "x", x);
  channel_vector(op, "gamma", gamma, x.size(1), x.dtype());
  channel_vector(op, "dgamma", dgamma, x.size(1), x.dtype());
  channel_vector(op, "dbeta", dbeta, x.size(1), x.dtype());
  TESSERA_CHECK(mean.shape() == without_dim1(x.shape()) && rstd.shape() == mean.shape(), op,
                ": mean/rstd shapes do not match ", x.describe());
  OpCall c;
  c.kind = OpKind::LayerNormBackward;
  c.in = {&dy, &x, &gamma, &mean, &rstd};
  c.out = {&dx, &dgamma, &dbeta};
  c.accumulate = accumulate;
  b.execute(c);
}

void activation_forward(Backend& b, Activation a, const Tensor& x, Tensor& y) {
  const char* op = "activation_forward";
  same_shape(op, "y", y, "x", x);
  same_dtype(op, x, y);
  is_float(op, x);
  OpCall c;
  c.kind = OpKind::ActivationForward;
  c.in = {&x};
  c.out = {&y};
  c.act = a;
  b.execute(c);
}

void activation_backward(Backend& b, Activation a, const Tensor& dy, const Tensor& saved, Tensor& dx) {
  const char* op = "activation_backward";
  same_shape(op, "dy", dy, "saved", saved);
  same_shape(op, "dx", dx, "dy", dy);
  same_dtype(op, dy, saved);
  OpCall c;
  c.kind = OpKind::ActivationBackward;
  c.in = {&dy, &saved};
  c.out = {&dx};
  c.act = a;
  b.execute(c);
}

void channel_moments(Backend& b, const Tensor& x, Tensor& sum, Tensor& sumsq) {
  const char* op = "channel_moments";
  TESSERA_CHECK(x.ndim() >= 2, op, ": input ", x.describe(), " needs a channel dimension");
  is_float(op, x);
  is_f64_vector(op, "sum", sum, x.size(1));
  is_f64_vector(op, "sumsq", sumsq, x.size(1));
  OpCall c;
  c.kind = OpKind::ChannelMoments;
  c.in = {&x};
  c.out = {&sum, &sumsq};
  b.execute(c);
}

void batchnorm_forward(Backend& b, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                       const Tensor& gamma, const Tensor& beta, Tensor& y) {
  const char* op = "batchnorm_forward";
  same_shape(op, "y", y, "x", x);
  is_float(op, x);
  for (const Tensor* t : {&mean, &rstd, &gamma, &beta}) channel_vector(op, "statistic", *t, x.size(1), x.dtype());
  OpCall c;
  c.kind = OpKind::BatchNormForward;
  c.in = {&x, &mean, &rstd, &gamma, &beta};
  c.out = {&y};
  b.execute(c);
}

void batchnorm_backward_reduce(Backend& b, const Tensor& dy, const Tensor& x, const Tensor& mean,
                               const Tensor& rstd, Tensor& sum_dy, Tensor& sum_dy_xhat) {
  const char* op = "batchnorm_backward_reduce";
  same_shape(op, "dy", dy, "x", x);
  channel_vector(op, "mean", mean, x.size(1), x.dtype());
  channel_vector(op, "rstd", rstd, x.size(1), x.dtype());
  is_f64_vector(op, "sum_dy", sum_dy, x.size(1));
  is_f64_vector(op, "sum_dy_xhat", sum_dy_xhat, x.size(1));
  OpCall c;
  c.kind = OpKind::BatchNormBackwardReduce;
  c.in = {&dy, &x, &mean, &rstd};
  c.out = {&sum_dy, &sum_dy_xhat};
  b.execute(c);
}

void batchnorm_backward_data(Backend& b, const Tensor& dy, const Tensor& x, const Tensor& mean,
                             const Tensor& rstd, const Tensor& gamma, const Tensor& sum_dy,
                             const Tensor& sum_dy_xhat, double count, Tensor& dx) {
  const char* op = "batchnorm_backward_data";
  same_shape(op, "dy", dy, "x", x);
  same_shape(op, "dx", dx, "x", x);
  for (const Tensor* t : {&mean, &rstd, &gamma}) channel_vector(op, "statistic", *t, x.size(1), x.dtype());
  is_f64_vector(op, "sum_dy", sum_dy, x.size(1));
  is_f64_vector(op, "sum_dy_xhat", sum_dy_xhat, x.size(1));
  TESSERA_CHECK(count > 0, op, ": count ", count, " must be positive");
  OpCall c;
  c.kind = OpKind::BatchNormBackwardData;
  c.in = {&dy, &x, &mean, &rstd, &gamma, &sum_dy, &sum_dy_xhat};
  c.out = {&dx};
  c.f[0] = count;
  b.execute(c);
}

namespace {
void check_scale_shape(const char* op, const Tensor& x, const Tensor& s) {
  TESSERA_CHECK(x.ndim() >= 2, op, ": input ", x.describe(), " needs a channel dimension");
  const bool per_channel = s.ndim() == 1 && s.size(0) == x.size(1);
  const bool per_sample = s.ndim() == 2 && s.size(0) == x.size(0) && s.size(1) == x.size(1);
  TESSERA_CHECK(per_channel || per_sample, op, ": scale ", s.describe(), " must be [", x.size(1),
                "] or [", x.size(0), ",", x.size(1), "] for input ", x.describe());
  same_dtype(op, x, s);
}
}  // namespace

void scale_channels(Backend& b, const Tensor& x, const Tensor& s, Tensor& y) {
  const char* op = "scale_channels";
  check_scale_shape(op, x, s);
  same_shape(op, "y", y, "x", x);
  OpCall c;
  c.kind = OpKind::ScaleChannels;
  c.in = {&x, &s};
  c.out = {&y};
  b.execute(c);
}

void scale_channels_backward(Backend& b, const Tensor& dy, const Tensor& x, const Tensor& s, Tensor* dx,
                             Tensor& ds, bool accumulate) {
  const char* op = "scale_channels_backward";
  check_scale_shape(op, x, s);
  same_shape(op, "dy", dy, "x", x);
  same_shape(op, "ds", ds, "s", s);
  if (dx && dx->defined()) same_shape(op, "dx", *dx, "x", x);
  OpCall c;
  c.kind = OpKind::ScaleChannelsBackward;
  c.in = {&dy, &x, &s};
  c.out = {(dx && dx->defined()) ? dx : nullptr, &ds};
  c.accumulate = accumulate;
  b.execute(c);
}

void channel_sum(Backend& b, const Tensor& x, Tensor& y) {
  const char* op = "channel_sum";
  TESSERA_CHECK(x.ndim() == 4 && y.ndim() == 2 && y.size(0) == x.size(0) && y.size(1) == x.size(1), op,
                ": x ", x.describe(), " must be 4-d and y ", y.describe(), " [N,C]");
  same_dtype(op, x, y);
  OpCall c;
  c.kind = OpKind::ChannelSum;
  c.in = {&x};
  c.out = {&y};
  b.execute(c);
}

void channel_broadcast(Backend& b, const Tensor& g, double scale_by, Tensor& y, bool accumulate) {
  const char* op = "channel_broadcast";
  TESSERA_CHECK(y.ndim() == 4 && g.ndim() == 2 && g.size(0) == y.size(0) && g.size(1) == y.size(1), op,
                ": g ", g.describe(), " must be [N,C] of y ", y.describe());
  same_dtype(op, g, y);
  OpCall c;
  c.kind = OpKind::ChannelBroadcast;
  c.in = {&g};
  c.out = {&y};
  c.f[0] = scale_by;
  c.accumulate = accumulate;
  b.execute(c);
}

void add(Backend& b, const Tensor& a, const Tensor& c2, Tensor& y) {
  const char* op = "add";
  same_shape(op, "a", a, "b", c2);
  same_shape(op, "y", y, "a", a);
  same_dtype(op, a, c2);
  same_dtype(op, a, y);
  OpCall c;
  c.kind = OpKind::Add;
  c.in = {&a, &c2};
  c.out = {&y};
  b.execute(c);
}

void axpy(Backend& b, double alpha, const Tensor& x, Tensor& y) {
  const char* op = "axpy";
  same_shape(op, "x", x, "y", y);
  same_dtype(op, x, y);
  OpCall c;
  c.kind = OpKind::Axpy;
  c.in = {&x};
  c.out = {&y};
  c.f[0] = alpha;
  b.execute(c);
}

void scale(Backend& b, double alpha, Tensor& y) {
  contiguous("scale", "y", y);
  OpCall c;
  c.kind = OpKind::Scale;
  c.out = {&y};
  c.f[0] = alpha;
  b.execute(c);
}

void scale_samples(Backend& b, const Tensor& x, const Tensor& s, Tensor& y) {
  const char* op = "scale_samples";
  TESSERA_CHECK(x.ndim() >= 1 && s.ndim() == 1 && s.size(0) == x.size(0), op, ": s ", s.describe(),
                " must have one entry per sample of ", x.describe());
  same_shape(op, "y", y, "x", x);
  same_dtype(op, x, s);
  OpCall c;
  c.kind = OpKind::ScaleSamples;
  c.in = {&x, &s};
  c.out = {&y};
  b.execute(c);
}

void softmax_cross_entropy(Backend& b, const Tensor& logits, const Tensor& labels, double grad_scale,
                           Tensor& loss, Tensor& dlogits) {
  const char* op = "softmax_cross_entropy";
  TESSERA_CHECK(logits.ndim() == 2 || logits.ndim() == 4, op, ": logits ", logits.describe(),
                " must be [N,K] or [N,K,H,W]");
  TESSERA_CHECK(labels.dtype() == DType::I64 && labels.shape() == without_dim1(logits.shape()), op,
                ": labels ", labels.describe(), " must be i64", core::shape_str(without_dim1(logits.shape())));
  is_f64_vector(op, "loss", loss, 1);
  same_shape(op, "dlogits", dlogits, "logits", logits);
  is_float(op, logits);
  OpCall c;
  c.kind = OpKind::SoftmaxCrossEntropy;
  c.in = {&logits, &labels};
  c.out = {&loss, &dlogits};
  c.f[0] = grad_scale;
  b.execute(c);
}

void upsample_nearest(Backend& b, const Tensor& x, int factor, Tensor& y) {
  const char* op = "upsample_nearest";
  TESSERA_CHECK(factor >= 1 && x.ndim() == 4 && y.ndim() == 4 && y.size(0) == x.size(0) &&
                    y.size(1) == x.size(1) && y.size(2) == x.size(2) * factor && y.size(3) == x.size(3) * factor,
                op, ": y ", y.describe(), " is not x ", x.describe(), " upsampled by ", factor);
  OpCall c;
  c.kind = OpKind::UpsampleNearest;
  c.in = {&x};
  c.out = {&y};
  c.i[0] = factor;
  b.execute(c);
}

void upsample_nearest_backward(Backend& b, const Tensor& dy, int factor, Tensor& dx) {
  const char* op = "upsample_nearest_backward";
  TESSERA_CHECK(factor >= 1 && dx.ndim() == 4 && dy.ndim() == 4 && dy.size(2) == dx.size(2) * factor &&
                    dy.size(3) == dx.size(3) * factor,
                op, ": dy ", dy.describe(), " is not dx ", dx.describe(), " upsampled by ", factor);
  OpCall c;
  c.kind = OpKind::UpsampleNearestBackward;
  c.in = {&dy};
  c.out = {&dx};
  c.i[0] = factor;
  b.execute(c);
}

void sgd_step(Backend& b, Tensor& param, const Tensor& grad, Tensor& buf, double lr, double momentum,
              double weight_decay, bool nesterov) {
  const char* op = "sgd_step";
  same_shape(op, "grad", grad, "param", param);
  same_shape(op, "momentum buffer", buf, "param", param);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&param, &grad, &buf}) contiguous(op, "tensor", *t);
  OpCall c;
  c.kind = OpKind::SgdStep;
  c.in = {&grad};
  c.out = {&param, &buf};
  c.f = {lr, momentum, weight_decay, nesterov ? 1.0 : 0.0, 0, 0};
  b.execute(c);
}

void adamw_step(Backend& b, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, double lr,
                double beta1, double beta2, double eps, double weight_decay, std::int64_t step) {
  const char* op = "adamw_step";
  same_shape(op, "grad", grad, "param", param);
  same_shape(op, "m", m, "param", param);
  same_shape(op, "v", v, "param", param);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&param, &grad, &m, &v}) contiguous(op, "tensor", *t);
  TESSERA_CHECK(step >= 1, op, ": step ", step, " must start at 1");
  OpCall c;
  c.kind = OpKind::AdamWStep;
  c.in = {&grad};
  c.out = {&param, &m, &v};
  c.f = {lr, beta1, beta2, eps, weight_decay, 0};
  c.i[0] = step;
  b.execute(c);
}

void sum_squares(Backend& b, const Tensor& x, Tensor& out) {
  is_f64_vector("sum_squares", "out", out, 1);
  OpCall c;
  c.kind = OpKind::SumSquares;
  c.in = {&x};
  c.out = {&out};
  b.execute(c);
}

}  // namespace tessera::compute
