// Nearest-neighbour upsampling of (N,C,H,W) by an integer factor f, and its adjoint (the sum of
// each f×f block). One task per input row.
#include <algorithm>
#include <cstring>

#include "ops_common.hpp"
#include "ops_kernels.hpp"

namespace tessera::compute::cpu::ops {

template <class T>
void run_upsample_nearest(const OpCall& call, ThreadPool& pool) {
  const core::Tensor& xt = call.input("x");
  const NcpIn<T> xin(xt);
  NcpOut<T> yout(call.output("y"), false);
  const Ncp<const T> x = xin.view;
  const Ncp<T> y = yout.view;
  const std::int64_t f = call.integer("factor"), h = xt.size(2), w = xt.size(3), wo = w * f;
  parallel_units(pool, x.n * x.c * h, wo * f, [&](std::int64_t u, int) {
    const std::int64_t row = u % h, nc = u / h, n = nc / x.c, c = nc % x.c;
    const T* in = x.plane(n, c) + row * w;
    T* out = y.plane(n, c) + row * f * wo;
    for (std::int64_t j = 0; j < w; ++j) std::fill(out + j * f, out + (j + 1) * f, in[j]);
    for (std::int64_t i = 1; i < f; ++i) std::memcpy(out + i * wo, out, sizeof(T) * std::size_t(wo));
  });
  yout.commit();
}

template <class T>
void run_upsample_nearest_backward(const OpCall& call, ThreadPool& pool) {
  const core::Tensor& dxt = call.output("dx");
  const core::Tensor& dyt = call.input("dy");
  TESSERA_CHECK(dyt.size(0) == dxt.size(0) && dyt.size(1) == dxt.size(1), "upsample_nearest_backward: dy ",
                dyt.describe(), " and dx ", dxt.describe(), " differ in N or C");
  const NcpIn<T> dyin(dyt);
  NcpOut<T> dxout(call.output("dx"), false);
  const Ncp<const T> dy = dyin.view;
  const Ncp<T> dx = dxout.view;
  const std::int64_t f = call.integer("factor"), h = dxt.size(2), w = dxt.size(3), wo = w * f;
  parallel_units(pool, dx.n * dx.c * h, wo * f, [&](std::int64_t u, int) {
    const std::int64_t row = u % h, nc = u / h, n = nc / dx.c, c = nc % dx.c;
    const T* in = dy.plane(n, c) + row * f * wo;
    T* out = dx.plane(n, c) + row * w;
    std::fill(out, out + w, T(0));
    for (std::int64_t i = 0; i < f; ++i)
      for (std::int64_t j = 0; j < w; ++j) {
        T s = out[j];
        for (std::int64_t k = 0; k < f; ++k) s += in[i * wo + j * f + k];
        out[j] = s;
      }
  });
  dxout.commit();
}

template void run_upsample_nearest<float>(const OpCall&, ThreadPool&);
template void run_upsample_nearest<double>(const OpCall&, ThreadPool&);
template void run_upsample_nearest_backward<float>(const OpCall&, ThreadPool&);
template void run_upsample_nearest_backward<double>(const OpCall&, ThreadPool&);

}  // namespace tessera::compute::cpu::ops
