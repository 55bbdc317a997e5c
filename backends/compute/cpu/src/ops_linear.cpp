// Linear layer y (M,N) = x (M,K)·wᵀ + b and its backward through Eigen GEMMs on row blocks; the
// weight gradient from per-chunk partial products (chunks from M alone) added in chunk order.
#include <algorithm>
#include <vector>

#include "gemm_util.hpp"
#include "ops_common.hpp"
#include "ops_kernels.hpp"
#include "ops_simd.hpp"

namespace tessera::compute::cpu::ops {

namespace {

/// Rows of x (and y) per GEMM task: a block of y stays in L2 between the bias fill and the GEMM.
constexpr std::int64_t kRowBlock = 256;

/// Distance between the rows of a matrix with unit column stride (any value when rows ≤ 1).
inline std::int64_t row_stride(const core::Tensor& t) { return t.size(0) <= 1 ? t.size(1) : t.stride(0); }
inline bool unit_columns(const core::Tensor& t) { return t.stride(1) == 1 || t.size(1) <= 1; }

/// A matrix with unit column stride (itself, or a contiguous Workspace copy): p, rows `ld` apart.
template <class T>
struct MatIn {
  explicit MatIn(const core::Tensor& t)
      : hold(unit_columns(t) ? t : t.clone(core::MemCategory::Workspace)),
        p(hold.data<T>()),
        ld(row_stride(hold)) {}
  core::Tensor hold;
  const T* p;
  std::int64_t ld;
};

/// An output matrix written in place when its column stride is 1, else through a contiguous
/// Workspace copy that commit() copies back.
template <class T>
struct MatOut {
  explicit MatOut(core::Tensor& t) : dst(t) {
    if (!unit_columns(t)) tmp = workspace_like(t);
    core::Tensor& m = tmp.defined() ? tmp : dst;
    p = m.data<T>();
    ld = row_stride(m);
  }
  void commit() {
    if (tmp.defined()) dst.copy_from(tmp);
  }
  core::Tensor& dst;
  core::Tensor tmp;
  T* p;
  std::int64_t ld;
};

}  // namespace

template <class T>
void run_linear_forward(const OpCall& call, ThreadPool& pool) {
  const core::Tensor &xt = call.input("x"), &wten = call.input("w");
  const core::Tensor* bt = call.input_if("bias");
  const MatIn<T> x(xt), w(wten);
  MatOut<T> y(call.output("y"));
  const std::int64_t M = xt.size(0), K = xt.size(1), N = wten.size(0);
  const std::vector<T> bias = bt ? read_vector<T>(*bt) : std::vector<T>();
  const auto wt = cmat(w.p, int(N), int(K), w.ld).transpose();
  parallel_units(pool, ceil_div(M, kRowBlock), kRowBlock * (K + N), [&](std::int64_t u, int) {
    const std::int64_t r0 = u * kRowBlock, rows = std::min(kRowBlock, M - r0);
    auto yb = mat(y.p + r0 * y.ld, int(rows), int(N), y.ld);
    const auto xb = cmat(x.p + r0 * x.ld, int(rows), int(K), x.ld);
    if (bias.empty()) {
      yb.noalias() = xb * wt;
    } else {  // Eigen's `=` zero-fills first anyway: filling with the bias instead costs nothing
      for (std::int64_t r = 0; r < rows; ++r) std::copy(bias.begin(), bias.end(), y.p + (r0 + r) * y.ld);
      yb.noalias() += xb * wt;
    }
  });
  y.commit();
}

template <class T>
void run_linear_backward(const OpCall& call, ThreadPool& pool) {
  const core::Tensor &dyt = call.input("dy"), &xt = call.input("x");
  core::Tensor* dxt = call.output_if("dx");
  core::Tensor* dbt = call.output_if("db");
  const MatIn<T> dy(dyt), x(xt), w(call.input("w"));
  const std::int64_t M = dyt.size(0), N = dyt.size(1), K = xt.size(1);
  if (dxt) {  // dx (M,K) = dy·w, overwritten
    MatOut<T> dx(*dxt);
    const auto wm = cmat(w.p, int(N), int(K), w.ld);
    parallel_units(pool, ceil_div(M, kRowBlock), kRowBlock * (K + N), [&](std::int64_t u, int) {
      const std::int64_t r0 = u * kRowBlock, rows = std::min(kRowBlock, M - r0);
      mat(dx.p + r0 * dx.ld, int(rows), int(K), dx.ld).noalias() =
          cmat(dy.p + r0 * dy.ld, int(rows), int(N), dy.ld) * wm;
    });
    dx.commit();
  }
  // dw (N,K) (+)= dyᵀ·x and db (N) (+)= Σ_m dy: chunk k sums rows [M·k/chunks, M·(k+1)/chunks)
  // into its own partials (T for dw, double for db).
  const std::int64_t chunks = std::max<std::int64_t>(1, std::min(ceil_div(M, kRowBlock), kReduceChunks));
  const std::int64_t wsize = N * K;
  core::Tensor wpart = workspace(dyt, core::dtype_of<T>, chunks * wsize);
  std::vector<double> bpart(static_cast<std::size_t>(chunks * N), 0.0);
  const bool want_db = dbt != nullptr;
  parallel_units(pool, chunks, (M / chunks + 1) * (N + K), [&](std::int64_t k, int) {
    const std::int64_t r0 = M * k / chunks, rows = M * (k + 1) / chunks - r0;
    const auto dyb = cmat(dy.p + r0 * dy.ld, int(rows), int(N), dy.ld);
    mat(wpart.data<T>() + k * wsize, int(N), int(K), K).noalias() =
        dyb.transpose() * cmat(x.p + r0 * x.ld, int(rows), int(K), x.ld);
    if (!want_db) return;
    double* acc = bpart.data() + k * N;
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* row = dy.p + (r0 + r) * dy.ld;
      vec_for<T>(N, [&](std::int64_t i, auto len) {
        astore<T>(acc + i, aload<T>(acc + i, len) + widen<T>(vload(row + i, len)), len);
      });
    }
  });
  core::Tensor& dwt = call.output("dw");
  T* dw = dwt.data<T>();
  const T* wp = wpart.data<T>();
  for (std::int64_t r = 0; r < N; ++r)
    for (std::int64_t c = 0; c < K; ++c) {
      double s = 0;
      for (std::int64_t k = 0; k < chunks; ++k) s += double(wp[k * wsize + r * K + c]);
      T& d = dw[r * dwt.stride(0) + c * dwt.stride(1)];
      d = static_cast<T>((call.accumulate ? double(d) : 0.0) + s);
    }
  if (want_db)
    store_reduced(dbt->data<T>(), dbt->stride(0), N, call.accumulate,
                  [&](std::int64_t i) { return sum_partials(bpart, N, i); });
}

template void run_linear_forward<float>(const OpCall&, ThreadPool&);
template void run_linear_forward<double>(const OpCall&, ThreadPool&);
template void run_linear_backward<float>(const OpCall&, ThreadPool&);
template void run_linear_backward<double>(const OpCall&, ThreadPool&);

}  // namespace tessera::compute::cpu::ops
