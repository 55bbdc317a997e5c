// Element-wise reductions by dtype for the UCX collectives (acc = acc ⊕ in), and Avg's division.
#pragma once

#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

#include "tessera/comm/backend.hpp"
#include "tessera/core/error.hpp"

namespace tessera::comm::ucx {

template <class T>
void reduce_typed(T* __restrict acc, const T* __restrict in, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: {
      // Eigen's packets: element-wise, so the sums are the scalar loop's bit for bit.
      using A = Eigen::Array<T, Eigen::Dynamic, 1>;
      const auto len = static_cast<Eigen::Index>(n);
      Eigen::Map<A>(acc, len) += Eigen::Map<const A>(in, len);
      break;
    }
    case ReduceOp::Max:
      for (std::size_t i = 0; i < n; ++i) acc[i] = in[i] > acc[i] ? in[i] : acc[i];
      break;
    case ReduceOp::Min:
      for (std::size_t i = 0; i < n; ++i) acc[i] = in[i] < acc[i] ? in[i] : acc[i];
      break;
  }
}

template <class F>
void with_type(core::DType t, F&& f) {
  switch (t) {
    case core::DType::F32: f(float{}); break;
    case core::DType::F64: f(double{}); break;
    case core::DType::I32: f(std::int32_t{}); break;
    case core::DType::I64: f(std::int64_t{}); break;
    default: throw Unsupported("ucx: reductions of this dtype are not supported");
  }
}

/// acc[i] = acc[i] ⊕ in[i] for `n` elements of `t` (acc and in do not overlap).
inline void reduce_into(void* acc, const void* in, std::size_t n, core::DType t, ReduceOp op) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    reduce_typed(static_cast<T*>(acc), static_cast<const T*>(in), n, op);
  });
}

/// Divides by `size` (Avg), in the element type (integers truncate toward zero).
inline void finish_avg(void* buf, std::size_t n, core::DType t, int size) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(buf);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(size));
  });
}

}  // namespace tessera::comm::ucx
