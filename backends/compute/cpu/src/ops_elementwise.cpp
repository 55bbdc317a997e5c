// Flat elementwise kernels: add, axpy, scale, scale_samples. Outputs may alias inputs.
#include <vector>

#include "ops_common.hpp"
#include "ops_kernels.hpp"
#include "ops_simd.hpp"

namespace tessera::compute::cpu::ops {

template <class T>
void run_add(const OpCall& call, ThreadPool& pool) {
  const FlatIn<T> a(call.input("a")), b(call.input("b"));
  FlatOut<T> y(call.output("y"), false);
  const T* pa = a.data();
  const T* pb = b.data();
  T* py = y.data();
  parallel_flat(pool, call.input("a").numel(), [&](std::int64_t s, std::int64_t e) {
    vec_for<T>(e - s, [&](std::int64_t i, auto len) {
      vstore(py + s + i, vload(pa + s + i, len) + vload(pb + s + i, len), len);
    });
  });
  y.commit();
}

template <class T>
void run_axpy(const OpCall& call, ThreadPool& pool) {
  const FlatIn<T> x(call.input("x"));
  FlatOut<T> y(call.output("y"), true);
  const T alpha = static_cast<T>(call.scalar("alpha"));
  const T* px = x.data();
  T* py = y.data();
  parallel_flat(pool, call.input("x").numel(), [&](std::int64_t s, std::int64_t e) {
    vec_for<T>(e - s, [&](std::int64_t i, auto len) {
      vstore(py + s + i, vload(py + s + i, len) + vload(px + s + i, len) * alpha, len);
    });
  });
  y.commit();
}

template <class T>
void run_scale(const OpCall& call, ThreadPool& pool) {
  FlatOut<T> y(call.output("y"), true);
  const T alpha = static_cast<T>(call.scalar("alpha"));
  T* py = y.data();
  parallel_flat(pool, call.output("y").numel(), [&](std::int64_t s, std::int64_t e) {
    vec_for<T>(e - s, [&](std::int64_t i, auto len) { vstore(py + s + i, vload(py + s + i, len) * alpha, len); });
  });
  y.commit();
}

template <class T>
void run_scale_samples(const OpCall& call, ThreadPool& pool) {
  const NcpIn<T> xin(call.input("x"), Split::Samples);
  const std::vector<T> s = read_vector<T>(call.input("s"));
  NcpOut<T> yout(call.output("y"), false, Split::Samples);
  const Ncp<const T> x = xin.view;
  const Ncp<T> y = yout.view;
  parallel_planes(pool, x.n, x.p, [&](std::int64_t n, std::int64_t p0, std::int64_t p1) {
    const T* in = x.plane(n, 0) + p0;
    T* out = y.plane(n, 0) + p0;
    const T k = s[n];
    vec_for<T>(p1 - p0, [&](std::int64_t i, auto len) { vstore(out + i, vload(in + i, len) * k, len); });
  });
  yout.commit();
}

#define TESSERA_INSTANTIATE(T)                                   \
  template void run_add<T>(const OpCall&, ThreadPool&);       \
  template void run_axpy<T>(const OpCall&, ThreadPool&);      \
  template void run_scale<T>(const OpCall&, ThreadPool&);     \
  template void run_scale_samples<T>(const OpCall&, ThreadPool&);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::compute::cpu::ops
