// Layer norm over dim 1 of (N,C) or (N,C,H,W). Each task takes a block of pixels of one sample and
// walks its C channel rows (H·W apart) vectorised across pixels, staging the block in per-worker
// scratch: rows a power of two apart would all fall into the same cache sets on a second pass.
// Statistics and reductions accumulate in double. The block kernels also serve bf16/f16 storage
// (ops_layernorm.hpp): 16-bit rows are widened as they are staged.
#include "ops_layernorm.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops_kernels.hpp"
#include "ops_simd.hpp"

namespace tessera::compute::cpu::ops {

template <class T, class S>
void layernorm_forward_blocks(const LayerNormForwardArgs<T, S>& a, ThreadPool& pool) {
  const Ncp<const S> x = a.x;
  const Ncp<S> y = a.y;
  const std::int64_t C = x.c, P = x.p;
  const double inv_c = C > 0 ? 1.0 / double(C) : 0.0;
  const std::int64_t B = block_pixels<T>(P, C), blocks = P > 0 ? ceil_div(P, B) : 0;
  constexpr bool kHalf = !std::is_same_v<S, T>;
  // T scratch: the staged block (C rows of B), the block's mean and rstd, and (16-bit storage)
  // one output row; double: Σd, Σd².
  const Scratch<T> scratch(*a.like, pool.size(), C * B + (kHalf ? 3 : 2) * B, 2 * B);

  parallel_units(pool, x.n * blocks, C * B, [&](std::int64_t unit, int worker) {
    const std::int64_t n = unit / blocks, p0 = (unit % blocks) * B, L = std::min(B, P - p0);
    T* stage = scratch.ts(worker);
    T* mt = stage + C * B;
    T* rt = mt + B;
    T* orow = rt + B;
    double* s1 = scratch.ds(worker);
    double* s2 = s1 + B;
    // Pass 1: stage the rows; sums of d = x − x[channel 0] (shifted, so Σd² − (Σd)²/C is exact
    // enough in double).
    std::fill(s1, s1 + 2 * B, 0.0);
    for (std::int64_t c = 0; c < C; ++c) {
      T* st = stage + c * L;
      const T* row = staged_row(x.plane(n, c) + p0, st, L, a.half);
      if (c + kPrefetchRows < C) prefetch_run(x.plane(n, c + kPrefetchRows) + p0, L);
      vec_for<T>(L, [&](std::int64_t i, auto len) {
        const Vec<T> v = vload(row + i, len);
        vstore(st + i, v, len);
        const AccVec<T> d = widen<T>(v) - widen<T>(vload(stage + i, len));
        astore<T>(s1 + i, aload<T>(s1 + i, len) + d, len);
        astore<T>(s2 + i, aload<T>(s2 + i, len) + d * d, len);
      });
    }
    T* mrow = a.mean.plane(n, 0) + p0;
    T* rrow = a.rstd.plane(n, 0) + p0;
    for (std::int64_t i = 0; i < L; ++i) {
      const double md = s1[i] * inv_c;
      const double var = std::max(0.0, s2[i] * inv_c - md * md);
      const double x0 = C > 0 ? double(stage[i]) : 0.0;
      mrow[i] = mt[i] = static_cast<T>(x0 + md);
      rrow[i] = rt[i] = static_cast<T>(1.0 / std::sqrt(var + a.eps));
    }
    // Pass 2: y = (x − mean)·rstd·gamma + beta from the staged rows.
    for (std::int64_t c = 0; c < C; ++c) {
      const T g = a.gamma[c], b = a.beta[c];
      const T* st = stage + c * L;
      T* out = out_row(y.plane(n, c) + p0, orow);
      if (c + kPrefetchRows < C) prefetch_run(y.plane(n, c + kPrefetchRows) + p0, L, true);
      vec_for<T>(L, [&](std::int64_t i, auto len) {
        const Vec<T> v = (vload(st + i, len) - vload(mt + i, len)) * vload(rt + i, len);
        vstore(out + i, v * g + b, len);
      });
      finish_row(out, y.plane(n, c) + p0, L, a.half);
    }
  });
}

template <class T, class S>
std::vector<double> layernorm_backward_blocks(const LayerNormBackwardArgs<T, S>& a,
                                              ThreadPool& pool) {
  const Ncp<const S> dy = a.dy, x = a.x;
  const Ncp<S> dx = a.dx;
  const std::int64_t C = x.c, P = x.p;
  const T inv_c = C > 0 ? T(1) / T(C) : T(0);
  const std::int64_t B = block_pixels<T>(P, 2 * C), blocks = P > 0 ? ceil_div(P, B) : 0;
  constexpr bool kHalf = !std::is_same_v<S, T>;
  // T scratch: staged dy and x̂ (C rows of B each), a/C and b/C, and (16-bit storage) one output
  // row; double: a = Σ γ·dy, b = Σ γ·dy·x̂.
  const Scratch<T> scratch(*a.like, pool.size(), 2 * C * B + (kHalf ? 3 : 2) * B, 2 * B);

  // Partials per chunk of blocks: Σ dy·x̂ (dgamma) in [0, C), Σ dy (dbeta) in [C, 2C).
  return chunk_partials(
      pool, x.n * blocks, 2 * C * B, 2 * C, [&](std::int64_t unit, int worker, double* acc) {
        const std::int64_t n = unit / blocks, p0 = (unit % blocks) * B, L = std::min(B, P - p0);
        T* sdy = scratch.ts(worker);
        T* sxh = sdy + C * B;
        T* at = sxh + C * B;
        T* bt = at + B;
        T* orow = bt + B;
        double* as = scratch.ds(worker);
        double* bs = as + B;
        const T* mrow = a.mean.plane(n, 0) + p0;
        const T* rrow = a.rstd.plane(n, 0) + p0;
        std::fill(as, as + 2 * B, 0.0);
        for (std::int64_t c = 0; c < C; ++c) {
          const T g = a.gamma[c];
          // 16-bit rows are widened where they are staged (x̂ then overwrites x, element by
          // element).
          const T* dyrow = staged_row(dy.plane(n, c) + p0, sdy + c * L, L, a.half);
          const T* xrow = staged_row(x.plane(n, c) + p0, sxh + c * L, L, a.half);
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
            astore<T>(as + i, aload<T>(as + i, len) + widen<T>(gd), len);
            astore<T>(bs + i, aload<T>(bs + i, len) + widen<T>(gd * xh), len);
            dg += widen<T>(d * xh);
            db += widen<T>(d);
          });
          acc[c] += lanes_sum(dg);
          acc[C + c] += lanes_sum(db);
        }
        for (std::int64_t i = 0; i < L; ++i) {
          at[i] = static_cast<T>(as[i]) * inv_c;
          bt[i] = static_cast<T>(bs[i]) * inv_c;
        }
        // dx = rstd·(γ·dy − mean_c(γ·dy) − x̂·mean_c(γ·dy·x̂)).
        for (std::int64_t c = 0; c < C; ++c) {
          const T g = a.gamma[c];
          T* out = out_row(dx.plane(n, c) + p0, orow);
          if (c + kPrefetchRows < C) prefetch_run(dx.plane(n, c + kPrefetchRows) + p0, L, true);
          vec_for<T>(L, [&](std::int64_t i, auto len) {
            const Vec<T> t = vload(sdy + c * L + i, len) * g - vload(at + i, len) -
                             vload(sxh + c * L + i, len) * vload(bt + i, len);
            vstore(out + i, t * vload(rrow + i, len), len);
          });
          finish_row(out, dx.plane(n, c) + p0, L, a.half);
        }
      });
}

template <class T>
void store_layernorm_grads(const OpCall& call, const std::vector<double>& part, std::int64_t C) {
  core::Tensor& dgamma = call.output("dgamma");
  core::Tensor& dbeta = call.output("dbeta");
  store_reduced(dgamma.data<T>(), dgamma.stride(0), C, call.accumulate,
                [&](std::int64_t c) { return sum_partials(part, 2 * C, c); });
  store_reduced(dbeta.data<T>(), dbeta.stride(0), C, call.accumulate,
                [&](std::int64_t c) { return sum_partials(part, 2 * C, C + c); });
}

template <class T>
void run_layernorm_forward(const OpCall& call, ThreadPool& pool) {
  const NcpIn<T> xin(call.input("x"));
  const std::vector<T> gamma = read_vector<T>(call.input("gamma")),
                       beta = read_vector<T>(call.input("beta"));
  NcpOut<T> yout(call.output("y"), false), mout(call.output("mean"), false, Split::Samples),
      rout(call.output("rstd"), false, Split::Samples);
  LayerNormForwardArgs<T, T> a{.x = xin.view,
                               .y = yout.view,
                               .mean = mout.view,
                               .rstd = rout.view,
                               .gamma = gamma.data(),
                               .beta = beta.data(),
                               .eps = call.scalar("eps"),
                               .like = &call.input("x")};
  layernorm_forward_blocks(a, pool);
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
  LayerNormBackwardArgs<T, T> a{.dy = dyin.view,
                                .x = xin.view,
                                .mean = min.view,
                                .rstd = rin.view,
                                .dx = dxout.view,
                                .gamma = gamma.data(),
                                .like = &call.input("dy")};
  const std::vector<double> part = layernorm_backward_blocks(a, pool);
  dxout.commit();
  store_layernorm_grads<T>(call, part, xin.view.c);
}

template void run_layernorm_forward<float>(const OpCall&, ThreadPool&);
template void run_layernorm_forward<double>(const OpCall&, ThreadPool&);
template void run_layernorm_backward<float>(const OpCall&, ThreadPool&);
template void run_layernorm_backward<double>(const OpCall&, ThreadPool&);
// bf16/f16 storage (ops_layernorm_half.cpp).
template void layernorm_forward_blocks<float, std::uint16_t>(
    const LayerNormForwardArgs<float, std::uint16_t>&, ThreadPool&);
template std::vector<double> layernorm_backward_blocks<float, std::uint16_t>(
    const LayerNormBackwardArgs<float, std::uint16_t>&, ThreadPool&);
template void store_layernorm_grads<float>(const OpCall&, const std::vector<double>&, std::int64_t);

}  // namespace tessera::compute::cpu::ops
