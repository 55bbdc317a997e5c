// ReLU, exact GELU (x·Φ(x)) and sigmoid, forward and backward, as flat SIMD loops; y may alias x
// and dx may alias dy. Float lanes use the vectorised exp/erf of ops_math.hpp.
#include "ops_common.hpp"
#include "ops_kernels.hpp"
#include "ops_math.hpp"

namespace tessera::compute::cpu::ops {

namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;     // 1/√2
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/√(2π)

template <class T>
TESSERA_OPS_INLINE Vec<T> relu(Vec<T> x) {
  const Vec<T> zero{};
  return x < zero ? zero : x;  // NaN passes through, as in PyTorch
}
/// Φ(x) = (1 + erf(x/√2))/2, the standard normal CDF.
template <class T>
TESSERA_OPS_INLINE Vec<T> normal_cdf(Vec<T> x) {
  return (erf_lanes(x * T(kSqrtHalf)) + T(1)) * T(0.5);
}
template <class T>
TESSERA_OPS_INLINE Vec<T> gelu(Vec<T> x) {
  return x * normal_cdf<T>(x);
}
/// d/dx x·Φ(x) = Φ(x) + x·φ(x), φ(x) = e^{−x²/2}/√(2π).
template <class T>
TESSERA_OPS_INLINE Vec<T> gelu_grad(Vec<T> x) {
  return normal_cdf<T>(x) + x * (exp_lanes(x * x * T(-0.5)) * T(kInvSqrt2Pi));
}
template <class T>
TESSERA_OPS_INLINE Vec<T> sigmoid(Vec<T> x) {
  return T(1) / (exp_lanes(-x) + T(1));
}

/// y = f(x) over [0, n), several chunks per thread.
template <class T, class F>
void map1(ThreadPool& pool, std::int64_t n, const T* x, T* y, F f) {
  parallel_flat(pool, n, [&](std::int64_t b, std::int64_t e) {
    vec_for<T>(e - b, [&](std::int64_t i, auto len) { vstore(y + b + i, f(vload(x + b + i, len)), len); });
  });
}
/// dx = g(dy, saved) over [0, n).
template <class T, class F>
void map2(ThreadPool& pool, std::int64_t n, const T* dy, const T* s, T* dx, F g) {
  parallel_flat(pool, n, [&](std::int64_t b, std::int64_t e) {
    vec_for<T>(e - b, [&](std::int64_t i, auto len) {
      vstore(dx + b + i, g(vload(dy + b + i, len), vload(s + b + i, len)), len);
    });
  });
}

}  // namespace

template <class T>
void run_activation_forward(const OpCall& call, ThreadPool& pool) {
  const FlatIn<T> x(call.input("x"));
  FlatOut<T> y(call.output("y"), false);
  const std::int64_t n = call.input("x").numel();
  switch (call.act) {
    case Activation::Relu: map1(pool, n, x.data(), y.data(), [](Vec<T> v) { return relu<T>(v); }); break;
    case Activation::Gelu: map1(pool, n, x.data(), y.data(), [](Vec<T> v) { return gelu<T>(v); }); break;
    case Activation::Sigmoid: map1(pool, n, x.data(), y.data(), [](Vec<T> v) { return sigmoid<T>(v); }); break;
  }
  y.commit();
}

template <class T>
void run_activation_backward(const OpCall& call, ThreadPool& pool) {
  const FlatIn<T> dy(call.input("dy")), saved(call.input("saved"));
  FlatOut<T> dx(call.output("dx"), false);
  const std::int64_t n = call.input("dy").numel();
  switch (call.act) {
    case Activation::Relu:  // saved = y: the gradient passes where y > 0
      map2(pool, n, dy.data(), saved.data(), dx.data(), [](Vec<T> d, Vec<T> y) {
        const Vec<T> zero{};
        return y > zero ? d : zero;
      });
      break;
    case Activation::Gelu:  // saved = x
      map2(pool, n, dy.data(), saved.data(), dx.data(),
           [](Vec<T> d, Vec<T> x) { return d * gelu_grad<T>(x); });
      break;
    case Activation::Sigmoid:  // saved = y: σ' = y·(1 − y)
      map2(pool, n, dy.data(), saved.data(), dx.data(),
           [](Vec<T> d, Vec<T> y) { return d * y * (T(1) - y); });
      break;
  }
  dx.commit();
}

template void run_activation_forward<float>(const OpCall&, ThreadPool&);
template void run_activation_forward<double>(const OpCall&, ThreadPool&);
template void run_activation_backward<float>(const OpCall&, ThreadPool&);
template void run_activation_backward<double>(const OpCall&, ThreadPool&);

}  // namespace tessera::compute::cpu::ops
