// Optimizer kernels on contiguous tensors: SGD (momentum, Nesterov, weight decay), AdamW with bias
// correction, and the f64 sum of squares behind gradient clipping.
#include <cmath>

#include "ops_common.hpp"
#include "ops_kernels.hpp"
#include "ops_simd.hpp"

namespace tessera::compute::cpu::ops {

template <class T>
void run_sgd_step(const OpCall& call, ThreadPool& pool) {
  core::Tensor& param = call.output("param");
  T* p = param.data<T>();
  T* buf = call.output("momentum_buf").data<T>();
  const T* g = call.input("grad").data<T>();
  const T lr = static_cast<T>(call.scalar("lr")), mom = static_cast<T>(call.scalar("momentum")),
          wd = static_cast<T>(call.scalar("weight_decay"));
  const bool nesterov = call.scalar("nesterov") != 0.0;
  // g' = g + wd·p; buf = mom·buf + g'; v = buf (or g' + mom·buf with Nesterov); p −= lr·v.
  parallel_flat(pool, param.numel(), [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t i = s; i < e; ++i) {
      const T gi = g[i] + wd * p[i];
      const T b = mom * buf[i] + gi;
      buf[i] = b;
      p[i] -= lr * (nesterov ? gi + mom * b : b);
    }
  });
}

template <class T>
void run_adamw_step(const OpCall& call, ThreadPool& pool) {
  core::Tensor& param = call.output("param");
  T* p = param.data<T>();
  T* m = call.output("m").data<T>();
  T* v = call.output("v").data<T>();
  const T* g = call.input("grad").data<T>();
  const double lr = call.scalar("lr"), beta1 = call.scalar("beta1"), beta2 = call.scalar("beta2"),
               eps = call.scalar("eps"), wd = call.scalar("weight_decay");
  const double t = static_cast<double>(call.integer("step"));
  // PyTorch's form: p ← p·(1 − lr·wd) − (lr / bc1)·m / (√v / √bc2 + eps), bc = 1 − βᵗ.
  const T decay = static_cast<T>(1.0 - lr * wd), b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
  const T c1 = static_cast<T>(1.0 - beta1), c2 = static_cast<T>(1.0 - beta2), e = static_cast<T>(eps);
  const T step = static_cast<T>(lr / (1.0 - std::pow(beta1, t)));
  const T inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(1.0 - std::pow(beta2, t)));
  parallel_flat(pool, param.numel(), [&](std::int64_t s, std::int64_t end) {
    for (std::int64_t i = s; i < end; ++i) {
      const T gi = g[i];
      const T mi = b1 * m[i] + c1 * gi;
      const T vi = b2 * v[i] + c2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      p[i] = p[i] * decay - step * mi / (std::sqrt(vi) * inv_sqrt_bc2 + e);
    }
  });
}

template <class T>
void run_sum_squares(const OpCall& call, ThreadPool& pool) {
  const FlatIn<T> x(call.input("x"));
  const T* px = x.data();
  const std::int64_t n = call.input("x").numel();
  const std::vector<double> part = chunk_partials(
      pool, ceil_div(n, kFlatChunk), kFlatChunk, 1, [&](std::int64_t u, int, double* acc) {
        const std::int64_t s = u * kFlatChunk;
        *acc += dot_d(px + s, px + s, std::min(kFlatChunk, n - s));
      });
  double total = 0;
  for (double v : part) total += v;
  call.output("sum").data<double>()[0] = total;
}

#define TESSERA_INSTANTIATE(T)                                   \
  template void run_sgd_step<T>(const OpCall&, ThreadPool&);  \
  template void run_adamw_step<T>(const OpCall&, ThreadPool&); \
  template void run_sum_squares<T>(const OpCall&, ThreadPool&);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::compute::cpu::ops
