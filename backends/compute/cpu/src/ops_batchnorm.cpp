// Batch norm pieces over dim 1 of (N,C,...): per-channel moments and backward sums (one task per
// channel, so no partials and no dependence on the thread count; f64 accumulation), and the
// elementwise forward and backward-data passes (one task per (n, c) plane).
#include <vector>

#include "ops_common.hpp"
#include "ops_kernels.hpp"
#include "ops_simd.hpp"

namespace tessera::compute::cpu::ops {

template <class T>
void run_channel_moments(const OpCall& call, ThreadPool& pool) {
  const NcpIn<T> xin(call.input("x"));
  const Ncp<const T> x = xin.view;
  core::Tensor& sum = call.output("sum");
  core::Tensor& sumsq = call.output("sumsq");
  double* s = sum.data<double>();
  double* q = sumsq.data<double>();
  parallel_units(pool, x.c, x.n * x.p, [&](std::int64_t c, int) {
    double a = 0, b = 0;
    for (std::int64_t n = 0; n < x.n; ++n) sum_sumsq_d(x.plane(n, c), x.p, a, b);
    s[c * sum.stride(0)] = a;
    q[c * sumsq.stride(0)] = b;
  });
}

template <class T>
void run_batchnorm_forward(const OpCall& call, ThreadPool& pool) {
  const NcpIn<T> xin(call.input("x"));
  const std::vector<T> mean = read_vector<T>(call.input("mean")), rstd = read_vector<T>(call.input("rstd")),
                       gamma = read_vector<T>(call.input("gamma")), beta = read_vector<T>(call.input("beta"));
  NcpOut<T> yout(call.output("y"), false);
  const Ncp<const T> x = xin.view;
  const Ncp<T> y = yout.view;
  parallel_planes(pool, x.n * x.c, x.p, [&](std::int64_t u, std::int64_t p0, std::int64_t p1) {
    const std::int64_t n = u / x.c, c = u % x.c;
    const T m = mean[c], a = static_cast<T>(double(rstd[c]) * double(gamma[c])), b = beta[c];
    const T* in = x.plane(n, c) + p0;
    T* out = y.plane(n, c) + p0;
    vec_for<T>(p1 - p0, [&](std::int64_t i, auto len) {
      vstore(out + i, (vload(in + i, len) - m) * a + b, len);
    });
  });
  yout.commit();
}

template <class T>
void run_batchnorm_backward_reduce(const OpCall& call, ThreadPool& pool) {
  const NcpIn<T> dyin(call.input("dy")), xin(call.input("x"));
  const std::vector<T> mean = read_vector<T>(call.input("mean")), rstd = read_vector<T>(call.input("rstd"));
  const Ncp<const T> dy = dyin.view, x = xin.view;
  core::Tensor& sum_dy = call.output("sum_dy");
  core::Tensor& sum_dy_xhat = call.output("sum_dy_xhat");
  double* s = sum_dy.data<double>();
  double* q = sum_dy_xhat.data<double>();
  parallel_units(pool, x.c, 2 * x.n * x.p, [&](std::int64_t c, int) {
    const double m = mean[c];
    AccVec<T> a{}, b{};
    for (std::int64_t n = 0; n < x.n; ++n) {
      const T* d = dy.plane(n, c);
      const T* xv = x.plane(n, c);
      vec_for<T>(x.p, [&](std::int64_t i, auto len) {
        const AccVec<T> g = widen<T>(vload(d + i, len));
        a += g;
        b += g * (widen<T>(vload(xv + i, len)) - m);
      });
    }
    s[c * sum_dy.stride(0)] = lanes_sum(a);
    q[c * sum_dy_xhat.stride(0)] = lanes_sum(b) * double(rstd[c]);
  });
}

template <class T>
void run_batchnorm_backward_data(const OpCall& call, ThreadPool& pool) {
  const NcpIn<T> dyin(call.input("dy")), xin(call.input("x"));
  const std::vector<T> mean = read_vector<T>(call.input("mean")), rstd = read_vector<T>(call.input("rstd")),
                       gamma = read_vector<T>(call.input("gamma"));
  const std::vector<double> sum_dy = read_vector<double>(call.input("sum_dy")),
                            sum_dy_xhat = read_vector<double>(call.input("sum_dy_xhat"));
  NcpOut<T> dxout(call.output("dx"), false);
  const Ncp<const T> dy = dyin.view, x = xin.view;
  const Ncp<T> dx = dxout.view;
  const double count = call.scalar("count");
  parallel_planes(pool, x.n * x.c, x.p, [&](std::int64_t u, std::int64_t p0, std::int64_t p1) {
    const std::int64_t n = u / x.c, c = u % x.c;
    // dx = γ·rstd·(dy − Σdy/count − x̂·Σdy·x̂/count) = k1·(dy − k0 − (x − mean)·k2).
    const double r = rstd[c];
    const T m = mean[c], k0 = static_cast<T>(sum_dy[c] / count),
            k1 = static_cast<T>(double(gamma[c]) * r), k2 = static_cast<T>(r * sum_dy_xhat[c] / count);
    const T* d = dy.plane(n, c) + p0;
    const T* xv = x.plane(n, c) + p0;
    T* out = dx.plane(n, c) + p0;
    vec_for<T>(p1 - p0, [&](std::int64_t i, auto len) {
      const Vec<T> t = vload(d + i, len) - k0 - (vload(xv + i, len) - m) * k2;
      vstore(out + i, t * k1, len);
    });
  });
  dxout.commit();
}

#define TESSERA_INSTANTIATE(T)                                                   \
  template void run_channel_moments<T>(const OpCall&, ThreadPool&);           \
  template void run_batchnorm_forward<T>(const OpCall&, ThreadPool&);         \
  template void run_batchnorm_backward_reduce<T>(const OpCall&, ThreadPool&); \
  template void run_batchnorm_backward_data<T>(const OpCall&, ThreadPool&);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::compute::cpu::ops
