// Layer norm over dim 1 of (N,C) or (N,C,H,W). Each task takes a block of pixels of one sample and
// walks its C channel rows (H·W apart) vectorised across pixels, staging the block in per-worker
// scratch: rows a power of two apart would all fall into the same cache sets on a second pass.
// Statistics and reductions accumulate in double.
#include <cmath>
#include <vector>

#include "ops_common.hpp"
#include "ops_kernels.hpp"
#include "ops_simd.hpp"

namespace tessera::compute::cpu::ops {

template <class T>
void run_layernorm_forward(const OpCall& call, ThreadPool& pool) {
  const NcpIn<T> xin(call.input("x"));
  const std::vector<T> gamma = read_vector<T>(call.input("gamma")), beta = read_vector<T>(call.input("beta"));
  NcpOut<T> yout(call.output("y"), false), mout(call.output("mean"), false, Split::Samples),
      rout(call.output("rstd"), false, Split::Samples);
  const Ncp<const T> x = xin.view;
  const Ncp<T> y = yout.view, mean = mout.view, rstd = rout.view;
  const std::int64_t C = x.c, P = x.p;
  const double eps = call.scalar("eps"), inv_c = C > 0 ? 1.0 / double(C) : 0.0;
  const std::int64_t B = block_pixels<T>(P, C), blocks = P > 0 ? ceil_div(P, B) : 0;
  // T scratch: the staged block (C rows of B) and the block's mean and rstd; double: Σd, Σd².
  const Scratch<T> scratch(call.input("x"), pool.size(), C * B + 2 * B, 2 * B);

  parallel_units(pool, x.n * blocks, C * B, [&](std::int64_t unit, int worker) {
    const std::int64_t n = unit / blocks, p0 = (unit % blocks) * B, L = std::min(B, P - p0);
    T* stage = scratch.ts(worker);
    T* mt = stage + C * B;
    T* rt = mt + B;
    double* s1 = scratch.ds(worker);
    double* s2 = s1 + B;
    // Pass 1: stage the rows; sums of d = x − x[channel 0] (shifted, so Σd² − (Σd)²/C is exact
    // enough in double).
    std::fill(s1, s1 + 2 * B, 0.0);
    for (std::int64_t c = 0; c < C; ++c) {
      const T* row = x.plane(n, c) + p0;
      if (c + kPrefetchRows < C) prefetch_run(x.plane(n, c + kPrefetchRows) + p0, L);
      T* st = stage + c * L;
      vec_for<T>(L, [&](std::int64_t i, auto len) {
        const Vec<T> v = vload(row + i, len);
        vstore(st + i, v, len);
        const AccVec<T> d = widen<T>(v) - widen<T>(vload(stage + i, len));
        astore<T>(s1 + i, aload<T>(s1 + i, len) + d, len);
        astore<T>(s2 + i, aload<T>(s2 + i, len) + d * d, len);
      });
    }
    T* mrow = mean.plane(n, 0) + p0;
    T* rrow = rstd.plane(n, 0) + p0;
    for (std::int64_t i = 0; i < L; ++i) {
      const double md = s1[i] * inv_c;
      const double var = std::max(0.0, s2[i] * inv_c - md * md);
      const double x0 = C > 0 ? double(stage[i]) : 0.0;
      mrow[i] = mt[i] = static_cast<T>(x0 + md);
      rrow[i] = rt[i] = static_cast<T>(1.0 / std::sqrt(var + eps));
    }
    // Pass 2: y = (x − mean)·rstd·gamma + beta from the staged rows.
    for (std::int64_t c = 0; c < C; ++c) {
      const T g = gamma[c], b = beta[c];
      const T* st = stage + c * L;
      T* out = y.plane(n, c) + p0;
      if (c + kPrefetchRows < C) prefetch_run(y.plane(n, c + kPrefetchRows) + p0, L, true);
      vec_for<T>(L, [&](std::int64_t i, auto len) {
        const Vec<T> v = (vload(st + i, len) - vload(mt + i, len)) * vload(rt + i, len);
        vstore(out + i, v * g + b, len);
      });
    }
  });
  yout.commit();
  mout.commit();
  rout.commit();
}

template <class T>
void run_layernorm_backward(const OpCall& call, ThreadPool& pool) {
  const NcpIn<T> dyin(call.input("dy")), xin(call.input("x"));
  const std::vector<T> gamma = read_vector<T>(call.input("gamma"));
  const NcpIn<T> min(call.input("mean"), Split::Samples), rin(call.input("rstd"), Split::Samples);
  NcpOut<T> dxout(call.output("dx"), false);
  const Ncp<const T> dy = dyin.view, x = xin.view, mean = min.view, rstd = rin.view;
  const Ncp<T> dx = dxout.view;
  const std::int64_t C = x.c, P = x.p;
  const T inv_c = C > 0 ? T(1) / T(C) : T(0);
  const std::int64_t B = block_pixels<T>(P, 2 * C), blocks = P > 0 ? ceil_div(P, B) : 0;
  // T scratch: staged dy and x̂ (C rows of B each), a/C and b/C; double: a = Σ γ·dy, b = Σ γ·dy·x̂.
  const Scratch<T> scratch(call.input("dy"), pool.size(), 2 * C * B + 2 * B, 2 * B);

  // Partials per chunk of blocks: Σ dy·x̂ (dgamma) in [0, C), Σ dy (dbeta) in [C, 2C).
  const std::vector<double> part = chunk_partials(
      pool, x.n * blocks, 2 * C * B, 2 * C, [&](std::int64_t unit, int worker, double* acc) {
        const std::int64_t n = unit / blocks, p0 = (unit % blocks) * B, L = std::min(B, P - p0);
        T* sdy = scratch.ts(worker);
        T* sxh = sdy + C * B;
        T* at = sxh + C * B;
        T* bt = at + B;
        double* a = scratch.ds(worker);
        double* b = a + B;
        const T* mrow = mean.plane(n, 0) + p0;
        const T* rrow = rstd.plane(n, 0) + p0;
        std::fill(a, a + 2 * B, 0.0);
        for (std::int64_t c = 0; c < C; ++c) {
          const T g = gamma[c];
          const T* dyrow = dy.plane(n, c) + p0;
          const T* xrow = x.plane(n, c) + p0;
          if (c + kPrefetchRows < C) {
            prefetch_run(dy.plane(n, c + kPrefetchRows) + p0, L);
            prefetch_run(x.plane(n, c + kPrefetchRows) + p0, L);
          }
          AccVec<T> dg{}, db{};
          vec_for<T>(L, [&](std::int64_t i, auto len) {
            const Vec<T> d = vload(dyrow + i, len);
            const Vec<T> xh = (vload(xrow + i, len) - vload(mrow + i, len)) * vload(rrow + i, len);
            vstore(sdy + c * L + i, d, len);
            vstore(sxh + c * L + i, xh, len);
            const Vec<T> gd = d * g;
            astore<T>(a + i, aload<T>(a + i, len) + widen<T>(gd), len);
            astore<T>(b + i, aload<T>(b + i, len) + widen<T>(gd * xh), len);
            dg += widen<T>(d * xh);
            db += widen<T>(d);
          });
          acc[c] += lanes_sum(dg);
          acc[C + c] += lanes_sum(db);
        }
        for (std::int64_t i = 0; i < L; ++i) {
          at[i] = static_cast<T>(a[i]) * inv_c;
          bt[i] = static_cast<T>(b[i]) * inv_c;
        }
        // dx = rstd·(γ·dy − mean_c(γ·dy) − x̂·mean_c(γ·dy·x̂)).
        for (std::int64_t c = 0; c < C; ++c) {
          const T g = gamma[c];
          T* out = dx.plane(n, c) + p0;
          if (c + kPrefetchRows < C) prefetch_run(dx.plane(n, c + kPrefetchRows) + p0, L, true);
          vec_for<T>(L, [&](std::int64_t i, auto len) {
            const Vec<T> t = vload(sdy + c * L + i, len) * g - vload(at + i, len) -
                             vload(sxh + c * L + i, len) * vload(bt + i, len);
            vstore(out + i, t * vload(rrow + i, len), len);
          });
        }
      });
  dxout.commit();
  core::Tensor& dgamma = call.output("dgamma");
  core::Tensor& dbeta = call.output("dbeta");
  store_reduced(dgamma.data<T>(), dgamma.stride(0), C, call.accumulate,
                [&](std::int64_t c) { return sum_partials(part, 2 * C, c); });
  store_reduced(dbeta.data<T>(), dbeta.stride(0), C, call.accumulate,
                [&](std::int64_t c) { return sum_partials(part, 2 * C, C + c); });
}

template void run_layernorm_forward<float>(const OpCall&, ThreadPool&);
template void run_layernorm_forward<double>(const OpCall&, ThreadPool&);
template void run_layernorm_backward<float>(const OpCall&, ThreadPool&);
template void run_layernorm_backward<double>(const OpCall&, ThreadPool&);

}  // namespace tessera::compute::cpu::ops
