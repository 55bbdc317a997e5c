// Per-channel kernels on (N,C,...): scale by s (C) or (N,C) and its backward, the channel sum
// over (H,W) and its adjoint, the broadcast. Sums accumulate in double, one task per output entry.
#include <optional>
#include <type_traits>

#include "ops_common.hpp"
#include "ops_kernels.hpp"
#include "ops_simd.hpp"

namespace tessera::compute::cpu::ops {

namespace {

/// Element (n, c) of a per-channel (C) or per-sample (N,C) scale tensor, through its strides.
template <class T>
struct ScaleView {
  explicit ScaleView(const core::Tensor& s)
      : p(s.data<std::remove_const_t<T>>()), per_sample(s.ndim() == 2), s0(s.stride(0)), s1(per_sample ? s.stride(1) : 0) {}
  T& at(std::int64_t n, std::int64_t c) const { return per_sample ? p[n * s0 + c * s1] : p[c * s0]; }
  T* p;
  bool per_sample;
  std::int64_t s0, s1;
};

template <class T>
void scale_row(const T* in, T* out, std::int64_t len_total, T k) {
  vec_for<T>(len_total, [&](std::int64_t i, auto len) { vstore(out + i, vload(in + i, len) * k, len); });
}

}  // namespace

template <class T>
void run_scale_channels(const OpCall& call, ThreadPool& pool) {
  const NcpIn<T> xin(call.input("x"));
  const ScaleView<const T> s(call.input("s"));
  NcpOut<T> yout(call.output("y"), false);
  const Ncp<const T> x = xin.view;
  const Ncp<T> y = yout.view;
  parallel_planes(pool, x.n * x.c, x.p, [&](std::int64_t u, std::int64_t p0, std::int64_t p1) {
    const std::int64_t n = u / x.c, c = u % x.c;
    scale_row(x.plane(n, c) + p0, y.plane(n, c) + p0, p1 - p0, s.at(n, c));
  });
  yout.commit();
}

template <class T>
void run_scale_channels_backward(const OpCall& call, ThreadPool& pool) {
  const NcpIn<T> dyin(call.input("dy")), xin(call.input("x"));
  const ScaleView<const T> s(call.input("s"));
  std::optional<NcpOut<T>> dxout;
  if (core::Tensor* dx = call.output_if("dx")) dxout.emplace(*dx, false);
  const ScaleView<T> ds(call.output("ds"));
  const Ncp<const T> dy = dyin.view, x = xin.view;
  // One unit per entry of ds: (n, c) per sample, c per channel (summing over n as well).
  const std::int64_t units = s.per_sample ? x.n * x.c : x.c, samples = s.per_sample ? 1 : x.n;
  parallel_units(pool, units, samples * x.p, [&](std::int64_t u, int) {
    const std::int64_t c = u % x.c, n0 = s.per_sample ? u / x.c : 0;
    double acc = 0;
    for (std::int64_t n = n0; n < n0 + samples; ++n) {
      acc += dot_d(dy.plane(n, c), x.plane(n, c), x.p);  // before dx: dx may alias dy
      if (dxout) scale_row(dy.plane(n, c), dxout->view.plane(n, c), x.p, s.at(n, c));
    }
    T& d = ds.at(n0, c);
    d = static_cast<T>((call.accumulate ? double(d) : 0.0) + acc);
  });
  if (dxout) dxout->commit();
}

template <class T>
void run_channel_sum(const OpCall& call, ThreadPool& pool) {
  const NcpIn<T> xin(call.input("x"));
  const Ncp<const T> x = xin.view;
  const ScaleView<T> y(call.output("y"));
  parallel_units(pool, x.n * x.c, x.p, [&](std::int64_t u, int) {
    const std::int64_t n = u / x.c, c = u % x.c;
    y.at(n, c) = static_cast<T>(sum_d(x.plane(n, c), x.p));
  });
}

template <class T>
void run_channel_broadcast(const OpCall& call, ThreadPool& pool) {
  const ScaleView<const T> g(call.input("g"));
  NcpOut<T> yout(call.output("y"), call.accumulate);
  const Ncp<T> y = yout.view;
  const double scale = call.scalar("scale");
  parallel_planes(pool, y.n * y.c, y.p, [&](std::int64_t u, std::int64_t p0, std::int64_t p1) {
    const std::int64_t n = u / y.c, c = u % y.c;
    const T v = static_cast<T>(double(g.at(n, c)) * scale);
    T* out = y.plane(n, c) + p0;
    if (call.accumulate)
      vec_for<T>(p1 - p0, [&](std::int64_t i, auto len) { vstore(out + i, vload(out + i, len) + v, len); });
    else
      std::fill(out, out + (p1 - p0), v);
  });
  yout.commit();
}

#define TESSERA_INSTANTIATE(T)                                                 \
  template void run_scale_channels<T>(const OpCall&, ThreadPool&);          \
  template void run_scale_channels_backward<T>(const OpCall&, ThreadPool&); \
  template void run_channel_sum<T>(const OpCall&, ThreadPool&);             \
  template void run_channel_broadcast<T>(const OpCall&, ThreadPool&);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::compute::cpu::ops
