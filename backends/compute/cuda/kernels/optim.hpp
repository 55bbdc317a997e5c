// Optimizer updates and the gradient norm on tensors of one shape: sgd_step (g' = g + wd·p;
// buf = mom·buf + g'; p −= lr·(nesterov ? g' + mom·buf : buf)), adamw_step (PyTorch's form,
// p ← p·(1 − lr·wd) − (lr/bc1)·m / (√v/√bc2 + eps), constants from the host in double, rounded to
// T as on the cpu backend) and sum_squares (Σx² in double, reduce.hpp). One item per element.
// Memory-bound: SGD moves 5 elements per element, AdamW 7, sum_squares 1: each should reach ≥ 80%
// of the GPU's copy bandwidth (one launch per tensor; a multi-tensor launch is the cuda side's).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hd.hpp"
#include "reduce.hpp"
#include "view.hpp"

namespace tessera::compute::cuda::kernels {

template <class T>
struct SgdParams {
  View<T> param, buf;
  View<const T> grad;
  T lr, momentum, weight_decay;
  bool nesterov;
};
template <class T>
struct SgdBody {
  static TESSERA_HD void run(const SgdParams<T>& q, std::int64_t i) {
    T& p = q.param.at(i);
    T& buf = q.buf.at(i);
    const T g = q.grad.at(i) + q.weight_decay * p;
    const T b = q.momentum * buf + g;
    buf = b;
    p -= q.lr * (q.nesterov ? g + q.momentum * b : b);
  }
};
template <class L, class T>
void run_sgd_step(L& l, SgdParams<T> q) {
  coalesce(q.param, q.buf, q.grad);
  l.template pass<SgdBody<T>>(q, q.param.numel());
}

template <class T>
struct AdamWParams {
  View<T> param, m, v;
  View<const T> grad;
  T decay, b1, b2, c1, c2, eps, step, inv_sqrt_bc2;
};
/// The constants of one AdamW step, computed on the host in double.
template <class T>
void set_adamw_constants(AdamWParams<T>& q, double lr, double beta1, double beta2, double eps,
                         double wd, std::int64_t step) {
  const double t = static_cast<double>(step);
  q.decay = T(1.0 - lr * wd);
  q.b1 = T(beta1);
  q.b2 = T(beta2);
  q.c1 = T(1.0 - beta1);
  q.c2 = T(1.0 - beta2);
  q.eps = T(eps);
  q.step = T(lr / (1.0 - k_pow(beta1, t)));
  q.inv_sqrt_bc2 = T(1.0 / k_sqrt(1.0 - k_pow(beta2, t)));
}
template <class T>
struct AdamWBody {
  static TESSERA_HD void run(const AdamWParams<T>& q, std::int64_t i) {
    const T g = q.grad.at(i);
    T& m = q.m.at(i);
    T& v = q.v.at(i);
    T& p = q.param.at(i);
    const T mi = q.b1 * m + q.c1 * g;
    const T vi = q.b2 * v + q.c2 * g * g;
    m = mi;
    v = vi;
    p = p * q.decay - q.step * mi / (k_sqrt(vi) * q.inv_sqrt_bc2 + q.eps);
  }
};
template <class L, class T>
void run_adamw_step(L& l, AdamWParams<T> q) {
  coalesce(q.param, q.m, q.v, q.grad);
  l.template pass<AdamWBody<T>>(q, q.param.numel());
}

// ---- sum_squares: out[0] = Σ x² (one row of numel terms) -----------------------------------
template <class T>
struct SquaresSrc {
  View<const T> x;
  TESSERA_HD void add(std::int64_t, std::int64_t, std::int64_t j, double* acc) const {
    const double v = double(x.at(j));
    acc[0] += v * v;
  }
};
struct ScalarStore {
  View<double> out;
  TESSERA_HD void store(std::int64_t, const double* v) const { out.vec(0) = v[0]; }
};
template <class T>
struct SumSquaresParams {
  View<const T> x;
  View<double> out;
};
template <class T>
RowSpace sum_squares_space(const SumSquaresParams<T>& q) {
  return {1, 1, q.x.numel(), false};
}
template <class T>
std::size_t workspace_bytes(const SumSquaresParams<T>& q) {
  return row_reduce_bytes<1>(sum_squares_space(q));
}
template <class L, class T>
void run_sum_squares(L& l, SumSquaresParams<T> q) {
  coalesce(q.x);
  void* ws = l.workspace(workspace_bytes(q));
  run_row_reduce<1>(l, sum_squares_space(q), SquaresSrc<T>{q.x}, ScalarStore{q.out}, ws);
}

}  // namespace tessera::compute::cuda::kernels
