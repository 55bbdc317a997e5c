// The calibration's kernel suite: every kernel class the ConvNeXt and RegNet models issue, at
// the sizes of their layers for inputs of 64×256 to 128×512 (batch 2, one or two spatial shards).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>

#include "calibrate_cases.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/core/half.hpp"

namespace tessera::sim::detail_calibrate {

namespace {

using compute::Activation;
using core::DType;
using core::Shape;
using core::Tensor;

/// Makes the suite's tensors: deterministic values in [lo, hi), filled on the host and, with a
/// device allocator, copied into its memory. uniform() makes parameters and statistics (f32, as
/// mixed precision keeps them), act() the call's activations in the dtype being timed.
class Maker {
 public:
  explicit Maker(core::AllocatorPtr device, DType act = DType::F32)
      : device_(std::move(device)), act_(act) {}
  Tensor uniform(Shape s, double lo = -1, double hi = 1, DType dt = DType::F32) {
    Tensor t = Tensor::empty(std::move(s), dt, core::MemCategory::Activation);
    if (dt == DType::F32) fill(t.data<float>(), t.numel(), lo, hi);
    else if (dt == DType::F64)
      fill(t.data<double>(), t.numel(), lo, hi);
    else
      fill_half(t, lo, hi);
    return placed(t);
  }
  Tensor act(Shape s, double lo = -1, double hi = 1) { return uniform(std::move(s), lo, hi, act_); }
  Tensor f64(Shape s) { return uniform(std::move(s), -1, 1, DType::F64); }
  Tensor labels(Shape s, int classes) {
    Tensor t = Tensor::empty(std::move(s), DType::I64, core::MemCategory::Activation);
    std::int64_t* p = t.data<std::int64_t>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<std::int64_t>(next() * classes);
    return placed(t);
  }

 private:
  Tensor placed(const Tensor& t) const { return device_ ? t.to(device_, core::MemCategory::Activation) : t; }
  /// A few thousand pseudo-random values, then copies of them (the values only need to be
  /// ordinary numbers; drawing each one would cost more than the kernels timed on them).
  template <class T>
  void fill(T* p, std::int64_t n, double lo, double hi) {
    const std::int64_t k = std::min<std::int64_t>(n, 4099);
    for (std::int64_t i = 0; i < k; ++i) p[i] = static_cast<T>(lo + (hi - lo) * next());
    for (std::int64_t i = k; i < n; i += k) std::copy(p, p + std::min(k, n - i), p + i);
  }
  void fill_half(Tensor& t, double lo, double hi) {
    std::vector<float> v(static_cast<std::size_t>(std::min<std::int64_t>(t.numel(), 4099)));
    fill(v.data(), static_cast<std::int64_t>(v.size()), lo, hi);
    std::uint16_t* p = t.data<std::uint16_t>();
    for (std::int64_t i = 0; i < t.numel(); ++i)
      p[i] = core::float_to_half(v[i % v.size()], t.dtype());
  }
  double next() {  // splitmix64 → [0, 1)
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
  }
  std::uint64_t state_ = 12345;
  core::AllocatorPtr device_;
  DType act_;
};

struct Conv {
  int cin, cout, k, stride, pad, groups, h, w;
};

std::string shape_text(const Shape& s) {
  std::ostringstream os;
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? "x" : "") << s[i];
  return os.str();
}

void add_conv(std::vector<TimedCall>& out, const Conv& g, const core::AllocatorPtr& alloc,
              DType dt) {
  compute::Conv2dParams p;
  p.kernel_h = p.kernel_w = g.k;
  p.stride_h = p.stride_w = g.stride;
  p.pad_h = p.pad_w = g.pad;
  p.groups = g.groups;
  const std::int64_t ho = (g.h + 2 * g.pad - g.k) / g.stride + 1, wo = (g.w + 2 * g.pad - g.k) / g.stride + 1;
  const Shape xs{2, g.cin, g.h, g.w}, ws{g.cout, g.cin / g.groups, g.k, g.k}, ys{2, g.cout, ho, wo};
  std::ostringstream os;
  os << g.k << "x" << g.k << "/s" << g.stride << " g" << g.groups << " " << g.cin << "->" << g.cout << " on "
     << shape_text(xs);
  const std::string l = os.str();
  out.push_back({l, [=]() -> Call {
                   Maker m(alloc, dt);
                   Tensor x = m.act(xs), w = m.uniform(ws), b = m.uniform({g.cout}), y = m.act(ys);
                   return [=](compute::Backend& be) mutable { compute::conv2d_forward(be, p, x, w, &b, y); };
                 }});
  out.push_back({l, [=]() -> Call {
                   Maker m(alloc, dt);
                   Tensor dy = m.act(ys), w = m.uniform(ws), dx = m.act(xs);
                   return [=](compute::Backend& be) mutable { compute::conv2d_backward_data(be, p, dy, w, dx); };
                 }});
  out.push_back({l, [=]() -> Call {
                   Maker m(alloc, dt);
                   Tensor x = m.act(xs), dy = m.act(ys), dw = m.uniform(ws),
                          db = m.uniform({g.cout});
                   return [=](compute::Backend& be) mutable {
                     compute::conv2d_backward_weight(be, p, x, dy, dw, &db);
                   };
                 }});
}

/// The tensors the normalisation, activation, elementwise and channel ops take, for an (N,C,H,W)
/// activation.
struct ActTensors {
  ActTensors(const Shape& s, const core::AllocatorPtr& alloc, DType dt) {
    Maker m(alloc, dt);
    const std::int64_t c = s[1];
    const Shape stat{s[0], s[2], s[3]};
    x = m.act(s), y = m.act(s), dy = m.act(s), dx = m.act(s);
    gamma = m.uniform({c}), beta = m.uniform({c}), dgamma = m.uniform({c}), dbeta = m.uniform({c});
    mean = m.uniform(stat, -0.1, 0.1), rstd = m.uniform(stat, 0.5, 2);
    cmean = m.uniform({c}, -0.1, 0.1), crstd = m.uniform({c}, 0.5, 2);
    sum = m.f64({c}), sumsq = m.f64({c});
    nc = m.uniform({s[0], c}), dnc = m.uniform({s[0], c}), per_sample = m.uniform({s[0]});
    if (s[2] % 2 == 0 && s[3] % 2 == 0) half = m.act({s[0], s[1], s[2] / 2, s[3] / 2});
  }
  Tensor x, y, dy, dx, gamma, beta, dgamma, dbeta, mean, rstd, cmean, crstd, sum, sumsq, nc, dnc, per_sample, half;
};

void add_activation_ops(std::vector<TimedCall>& out, const Shape& s,
                        const core::AllocatorPtr& alloc, DType dt) {
  const std::string l = "on " + shape_text(s);
  using F = std::function<void(compute::Backend&, ActTensors&)>;
  auto add = [&](F f) {
    out.push_back({l, [s, f, alloc, dt]() -> Call {
                     auto t = std::make_shared<ActTensors>(s, alloc, dt);
                     return [t, f](compute::Backend& be) { f(be, *t); };
                   }});
  };
  add([](compute::Backend& be, ActTensors& t) {
    compute::layernorm_forward(be, t.x, t.gamma, t.beta, 1e-6, t.y, t.mean, t.rstd);
  });
  add([](compute::Backend& be, ActTensors& t) {
    compute::layernorm_backward(be, t.dy, t.x, t.gamma, t.mean, t.rstd, t.dx, t.dgamma, t.dbeta);
  });
  for (Activation a : {Activation::Gelu, Activation::Relu, Activation::Sigmoid}) {
    add([a](compute::Backend& be, ActTensors& t) { compute::activation_forward(be, a, t.x, t.y); });
    add([a](compute::Backend& be, ActTensors& t) { compute::activation_backward(be, a, t.dy, t.x, t.dx); });
  }
  add([](compute::Backend& be, ActTensors& t) { compute::channel_moments(be, t.x, t.sum, t.sumsq); });
  add([](compute::Backend& be, ActTensors& t) {
    compute::batchnorm_forward(be, t.x, t.cmean, t.crstd, t.gamma, t.beta, t.y);
  });
  add([](compute::Backend& be, ActTensors& t) {
    compute::batchnorm_backward_reduce(be, t.dy, t.x, t.cmean, t.crstd, t.sum, t.sumsq);
  });
  add([](compute::Backend& be, ActTensors& t) {
    compute::batchnorm_backward_data(be, t.dy, t.x, t.cmean, t.crstd, t.gamma, t.sum, t.sumsq, 1000.0, t.dx);
  });
  add([](compute::Backend& be, ActTensors& t) { compute::scale_channels(be, t.x, t.gamma, t.y); });
  add([](compute::Backend& be, ActTensors& t) { compute::scale_channels(be, t.x, t.nc, t.y); });
  add([](compute::Backend& be, ActTensors& t) {
    compute::scale_channels_backward(be, t.dy, t.x, t.gamma, &t.dx, t.dgamma);
  });
  add([](compute::Backend& be, ActTensors& t) {
    compute::scale_channels_backward(be, t.dy, t.x, t.nc, &t.dx, t.dnc);
  });
  add([](compute::Backend& be, ActTensors& t) { compute::channel_sum(be, t.x, t.nc); });
  add([](compute::Backend& be, ActTensors& t) { compute::channel_broadcast(be, t.nc, 0.5, t.y, true); });
  add([](compute::Backend& be, ActTensors& t) { compute::add(be, t.x, t.dy, t.y); });
  add([](compute::Backend& be, ActTensors& t) { compute::axpy(be, 0.5, t.x, t.y); });
  add([](compute::Backend& be, ActTensors& t) { compute::scale_samples(be, t.x, t.per_sample, t.y); });
  // A sharded convolution's halo buffer: its own part copied in, whole and as a window.
  add([](compute::Backend& be, ActTensors& t) { compute::copy(be, t.x, t.y); });
  if (s[3] > 2)
    add([](compute::Backend& be, ActTensors& t) {
      Tensor to = t.y.narrow(3, 1, t.y.size(3) - 2);
      compute::copy(be, t.x.narrow(3, 1, t.x.size(3) - 2), to);
    });
  if (s[2] % 2 == 0 && s[3] % 2 == 0) {
    add([](compute::Backend& be, ActTensors& t) { compute::upsample_nearest(be, t.half, 2, t.y); });
    add([](compute::Backend& be, ActTensors& t) { compute::upsample_nearest_backward(be, t.dy, 2, t.half); });
  }
}

/// Top-k gradient compression's three kernels on a bucket of n f32 elements at the default ratio
/// (1%): select, the scatter-add of two ranks' pairs, the residual. Host buckets only (the
/// trainer compresses nothing on a GPU), so the suite has them on the cpu alone.
void add_topk_ops(std::vector<TimedCall>& out, std::int64_t n) {
  const std::int64_t k = std::max<std::int64_t>(1, n / 100);
  const std::string l = "on " + std::to_string(n) + ", k " + std::to_string(k);
  // k distinct indices spread over the bucket, then k values' bits (0.5f), per rank.
  auto pairs = [n, k](int ranks) {
    Tensor t = Tensor::empty({2 * k * ranks}, DType::I32, core::MemCategory::Gradient);
    std::int32_t* p = t.data<std::int32_t>();
    const float half = 0.5f;
    std::int32_t bits = 0;
    std::memcpy(&bits, &half, sizeof bits);
    for (int q = 0; q < ranks; ++q)
      for (std::int64_t j = 0; j < k; ++j) {
        p[q * 2 * k + j] = static_cast<std::int32_t>((j * n) / k + q) % static_cast<std::int32_t>(n);
        p[q * 2 * k + k + j] = bits;
      }
    return t;
  };
  out.push_back({l, [n, k]() -> Call {
                   Maker m(nullptr);
                   Tensor g = m.uniform({n}), r = m.uniform({n}), acc = m.uniform({n});
                   Tensor order = Tensor::empty({n}, DType::I32, core::MemCategory::Workspace);
                   Tensor send = Tensor::empty({2 * k}, DType::I32, core::MemCategory::Gradient);
                   return [=](compute::Backend& be) mutable { compute::topk_select(be, g, r, 1.0, k, acc, order, send); };
                 }});
  out.push_back({l, [n, k, pairs]() -> Call {
                   Maker m(nullptr);
                   Tensor recv = pairs(2), grad = m.uniform({n});
                   return [=](compute::Backend& be) mutable { compute::topk_scatter_add(be, recv, k, grad); };
                 }});
  out.push_back({l, [n, pairs]() -> Call {
                   Maker m(nullptr);
                   Tensor sent = pairs(1), acc = m.uniform({n}), r = m.uniform({n});
                   return [=](compute::Backend& be) mutable { compute::topk_residual(be, sent, 1.0, acc, r); };
                 }});
}

/// The optimizer and gradient-norm ops on a parameter of `n` elements.
void add_parameter_ops(std::vector<TimedCall>& out, std::int64_t n, const core::AllocatorPtr& alloc) {
  const std::string l = "on " + std::to_string(n);
  out.push_back({l, [n, alloc]() -> Call {
                   Maker m(alloc);
                   Tensor p = m.uniform({n}), g = m.uniform({n}), mo = m.uniform({n}, 0, 0.1), v = m.uniform({n}, 0, 0.1);
                   return [=](compute::Backend& be) mutable {
                     compute::adamw_step(be, p, g, mo, v, 1e-9, 0.9, 0.999, 1e-8, 0.0, 10);
                   };
                 }});
  out.push_back({l, [n, alloc]() -> Call {
                   Maker m(alloc);
                   Tensor p = m.uniform({n}), g = m.uniform({n}), buf = m.uniform({n});
                   return [=](compute::Backend& be) mutable { compute::sgd_step(be, p, g, buf, 1e-9, 0.9, 0.0, false); };
                 }});
  out.push_back({l, [n, alloc]() -> Call {
                   Maker m(alloc);
                   Tensor g = m.uniform({n}), ss = m.f64({1});
                   return [=](compute::Backend& be) mutable { compute::sum_squares(be, g, ss); };
                 }});
  out.push_back({l, [n, alloc]() -> Call {
                   Maker m(alloc);
                   Tensor g = m.uniform({n});
                   return [=](compute::Backend& be) mutable { compute::scale(be, 1.0, g); };
                 }});
}

void add_linear(std::vector<TimedCall>& out, int rows, int in, int outs,
                const core::AllocatorPtr& alloc, DType dt) {
  const std::string l = std::to_string(rows) + "x" + std::to_string(in) + "->" + std::to_string(outs);
  out.push_back({l, [=]() -> Call {
                   Maker m(alloc, dt);
                   Tensor x = m.act({rows, in}), w = m.uniform({outs, in}), b = m.uniform({outs});
                   Tensor y = m.act({rows, outs});
                   return [=](compute::Backend& be) mutable { compute::linear_forward(be, x, w, &b, y); };
                 }});
  out.push_back(
      {l, [=]() -> Call {
         Maker m(alloc, dt);
         Tensor x = m.act({rows, in}), dx = m.act({rows, in}), w = m.uniform({outs, in});
         Tensor dw = m.uniform({outs, in}), db = m.uniform({outs}), dy = m.act({rows, outs});
         return [=](compute::Backend& be) mutable {
           compute::linear_backward(be, dy, x, w, &dx, dw, &db);
         };
       }});
}

void add_loss(std::vector<TimedCall>& out, const Shape& logits_shape,
              const core::AllocatorPtr& alloc, DType dt) {
  out.push_back({"on " + shape_text(logits_shape), [logits_shape, alloc, dt]() -> Call {
                   Maker m(alloc, dt);
                   Shape ls = logits_shape;
                   const int k = static_cast<int>(ls[1]);
                   ls.erase(ls.begin() + 1);
                   Tensor logits = m.act(logits_shape), dlogits = m.act(logits_shape);
                   Tensor labels = m.labels(ls, k), loss = m.f64({1});
                   return [=](compute::Backend& be) mutable {
                     compute::softmax_cross_entropy(be, logits, labels, 0.5, loss, dlogits);
                   };
                 }});
}

}  // namespace

std::vector<TimedCall> kernel_suite(bool quick, const core::AllocatorPtr& alloc, DType dt) {
  std::vector<TimedCall> out;
  // Convolutions: ConvNeXt's 7×7 depthwise, 1×1 expansions and projections, 4×4/s4 stem and
  // 2×2/s2 downsampling; RegNet's 3×3/s2 stem, grouped 3×3 (group width 8, stride 1 and 2) and
  // 1×1/s2 shortcut; a dense 3×3. Sizes from the last stage (2×8) to the first (32×128), and
  // narrow windows, whose per-row cost the fit needs to see.
  std::vector<Conv> convs = {
      {16, 16, 7, 1, 3, 16, 16, 64},  {32, 32, 7, 1, 3, 32, 8, 32},   {64, 64, 7, 1, 3, 64, 2, 8},
      {16, 64, 1, 1, 0, 1, 16, 64},   {64, 16, 1, 1, 0, 1, 16, 64},   {48, 192, 1, 1, 0, 1, 4, 16},
      {192, 48, 1, 1, 0, 1, 4, 16},   {64, 256, 1, 1, 0, 1, 2, 8},    {3, 16, 4, 4, 0, 1, 64, 256},
      {16, 32, 2, 2, 0, 1, 16, 64},   {48, 64, 2, 2, 0, 1, 4, 16},    {3, 16, 3, 2, 1, 1, 64, 256},
      {16, 32, 1, 2, 0, 1, 16, 64},   {16, 16, 3, 1, 1, 1, 16, 64},   {16, 16, 3, 1, 1, 2, 16, 64},
      {32, 32, 3, 2, 1, 4, 16, 64},   {48, 48, 3, 1, 1, 6, 4, 16},    {64, 64, 3, 1, 1, 8, 2, 8},
      {8, 16, 2, 2, 0, 1, 32, 128},   {32, 64, 2, 2, 0, 1, 8, 32},
      // Narrow windows (a sharded convolution's borders): many rows of a few columns.
      {16, 16, 7, 1, 3, 16, 16, 3},   {32, 32, 7, 1, 3, 32, 8, 2},    {16, 16, 3, 1, 1, 1, 16, 2},
      {32, 32, 3, 1, 1, 4, 16, 2},
  };
  if (!quick) {
    convs.push_back({32, 32, 7, 1, 3, 32, 32, 128});
    convs.push_back({32, 128, 1, 1, 0, 1, 32, 128});
    convs.push_back({128, 32, 1, 1, 0, 1, 32, 128});
    convs.push_back({3, 32, 4, 4, 0, 1, 128, 512});
    convs.push_back({32, 32, 3, 1, 1, 4, 32, 128});
    convs.push_back({32, 32, 3, 1, 1, 1, 32, 128});
    // A large model's first stage (ConvNeXt-T's 96 channels at 64×128: 3×256×1024 on two
    // shards): operands far beyond a core's L2, and GEMMs big enough for several threads to
    // share. Without them the fit extrapolates from small calls, which run at other rates: cache-
    // bound bandwidths 2–3× above memory's, GEMMs a thread pool cannot split (docs/simulator.md).
    convs.push_back({96, 96, 7, 1, 3, 96, 64, 128});
    convs.push_back({96, 384, 1, 1, 0, 1, 64, 128});
    convs.push_back({384, 96, 1, 1, 0, 1, 64, 128});
    convs.push_back({96, 192, 2, 2, 0, 1, 64, 128});
    convs.push_back({192, 384, 2, 2, 0, 1, 32, 64});  // its later downsamplings
    convs.push_back({384, 768, 2, 2, 0, 1, 16, 32});
  }
  for (const Conv& c : convs) add_conv(out, c, alloc, dt);
  std::vector<Shape> acts = {{2, 64, 2, 8}, {2, 16, 16, 64}, {2, 64, 16, 64}, {2, 48, 4, 16}};
  if (!quick) {
    acts.push_back({2, 64, 32, 128});
    acts.push_back({2, 96, 64, 128});  // the large model's first stage, as above
    acts.push_back({2, 384, 32, 64});
  }
  for (const Shape& s : acts) add_activation_ops(out, s, alloc, dt);
  // Parameters, their gradients and optimizer state stay f32 in mixed precision, and top-k
  // compresses f32 buckets: those ops are timed in the f32 suite only.
  if (dt == DType::F32) {
    std::vector<std::int64_t> params = {16, 1024, 16384, 262144};
    if (!quick) params.push_back(2 << 20);
    for (std::int64_t n : params) add_parameter_ops(out, n, alloc);
    if (!alloc)  // top-k runs on host buckets only
      for (std::int64_t n : {std::int64_t(16384), std::int64_t(262144), std::int64_t(2 << 20)})
        if (!quick || n < (2 << 20)) add_topk_ops(out, n);
  }
  add_linear(out, 2, 16, 4, alloc, dt);
  add_linear(out, 2, 64, 16, alloc, dt);
  add_linear(out, 2, 768, 1000, alloc, dt);
  add_loss(out, {2, 4}, alloc, dt);
  add_loss(out, {2, 1000}, alloc, dt);
  add_loss(out, {2, 5, 16, 64}, alloc, dt);
  if (!quick) add_loss(out, {2, 5, 64, 256}, alloc, dt);
  return out;
}

}  // namespace tessera::sim::detail_calibrate
