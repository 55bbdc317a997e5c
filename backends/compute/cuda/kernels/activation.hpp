// ReLU, exact GELU (x·Φ(x), Φ(x) = (1 + erf(x/√2))/2) and sigmoid, forward and backward, one item
// per element over views of one shape (y may alias x, dx may alias dy), the cpu backend's formulas
// in T: relu passes NaN; gelu' = Φ(x) + x·e^(−x²/2)/√(2π) (saved = x); relu' = [y > 0] and
// sigmoid' = y·(1 − y) (saved = y). Memory-bound: 2 elements moved per element forward, 3
// backward; ≥ 80% of the GPU's copy bandwidth (GELU's erf and exp fit in the memory time).
#pragma once

#include <cstdint>

#include "half.hpp"
#include "hd.hpp"
#include "view.hpp"

namespace tessera::compute::cuda::kernels {

/// The activation of a call (compute::Activation's order).
enum class Act : int { Relu = 0, Gelu = 1, Sigmoid = 2 };

inline constexpr double kSqrtHalf = 0.70710678118654752440;    // 1/√2
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/√(2π)

template <class T>
TESSERA_HD inline T normal_cdf(T x) {
  return (k_erf(x * T(kSqrtHalf)) + T(1)) * T(0.5);
}
template <class T>
TESSERA_HD inline T act_forward(Act a, T x) {
  switch (a) {
    case Act::Relu:
      return x < T(0) ? T(0) : x;
    case Act::Gelu:
      return x * normal_cdf(x);
    default:
      return T(1) / (k_exp(-x) + T(1));
  }
}
template <class T>
TESSERA_HD inline T act_backward(Act a, T dy, T saved) {
  switch (a) {
    case Act::Relu:
      return saved > T(0) ? dy : T(0);
    case Act::Gelu:
      return dy * (normal_cdf(saved) + saved * (k_exp(saved * saved * T(-0.5)) * T(kInvSqrt2Pi)));
    default:
      return dy * saved * (T(1) - saved);
  }
}

// T computes, S stores (S = Bf16/F16 with T = float: loaded widened, stored rounded once).
template <class T, class S = T>
struct ActForwardParams {
  View<const S> x;
  View<S> y;
  Act act;
};
template <class T, class S>
struct ActForwardBody {
  static TESSERA_HD void run(const ActForwardParams<T, S>& q, std::int64_t i) {
    q.y.at(i) = convert<S>(act_forward(q.act, convert<T>(q.x.at(i))));
  }
};
template <class L, class T, class S>
void run_activation_forward(L& l, ActForwardParams<T, S> q) {
  coalesce(q.x, q.y);
  l.template pass<ActForwardBody<T, S>>(q, q.x.numel());
}

template <class T, class S = T>
struct ActBackwardParams {
  View<const S> dy, saved;
  View<S> dx;
  Act act;
};
template <class T, class S>
struct ActBackwardBody {
  static TESSERA_HD void run(const ActBackwardParams<T, S>& q, std::int64_t i) {
    q.dx.at(i) = convert<S>(act_backward(q.act, convert<T>(q.dy.at(i)), convert<T>(q.saved.at(i))));
  }
};
template <class L, class T, class S>
void run_activation_backward(L& l, ActBackwardParams<T, S> q) {
  coalesce(q.dy, q.saved, q.dx);
  l.template pass<ActBackwardBody<T, S>>(q, q.dy.numel());
}

}  // namespace tessera::compute::cuda::kernels
