// The shared reduction kernels (tessera/comm/reduction.hpp). Float sums run through Eigen's
// packets, which add element by element, so they are the scalar loop's sums bit for bit.
#include "tessera/comm/reduction.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <Eigen/Core>

#include "tessera/core/error.hpp"
#include "tessera/core/half.hpp"

namespace tessera::comm::reduction {

namespace {

/// Reductions in order work through stack buffers of this many bytes, one chunk of elements at a
/// time, so that an output may alias an input.
constexpr std::size_t kChunkBytes = 16 * 1024;

template <class T>
void sum_into(T* __restrict acc, const T* __restrict in, std::size_t n) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;  // wraps on overflow instead of undefined behaviour
    for (std::size_t i = 0; i < n; ++i)
      acc[i] = static_cast<T>(static_cast<U>(acc[i]) + static_cast<U>(in[i]));
  } else {
    using A = Eigen::Array<T, Eigen::Dynamic, 1>;
    const auto len = static_cast<Eigen::Index>(n);
    Eigen::Map<A>(acc, len) += Eigen::Map<const A>(in, len);
  }
}

template <class T>
void reduce_typed(T* __restrict acc, const T* __restrict in, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      sum_into(acc, in, n);
      break;
    case ReduceOp::Max:
      for (std::size_t i = 0; i < n; ++i) acc[i] = in[i] > acc[i] ? in[i] : acc[i];
      break;
    case ReduceOp::Min:
      for (std::size_t i = 0; i < n; ++i) acc[i] = in[i] < acc[i] ? in[i] : acc[i];
      break;
  }
}

/// f(T{}) with T the element type of `t` (not bf16/f16).
template <class F>
void with_type(core::DType t, F&& f) {
  switch (t) {
    case core::DType::F32:
      return f(float{});
    case core::DType::F64:
      return f(double{});
    case core::DType::I32:
      return f(std::int32_t{});
    case core::DType::I64:
      return f(std::int64_t{});
    case core::DType::BF16:
    case core::DType::F16:
      break;
  }
  throw InternalError(detail::cat("comm reduction: dtype ", core::dtype_name(t),
                                  " reached a kernel of 32- and 64-bit types unwidened"));
}

template <class T>
void in_order_typed(const std::vector<const void*>& in, const std::vector<void*>& out,
                    std::size_t count, ReduceOp op) {
  constexpr std::size_t kChunk = kChunkBytes / sizeof(T);
  alignas(64) T acc[kChunk];
  const std::size_t n = in.size();
  for (std::size_t c0 = 0; c0 < count; c0 += kChunk) {
    const std::size_t m = std::min(kChunk, count - c0);
    std::copy_n(static_cast<const T*>(in[0]) + c0, m, acc);
    for (std::size_t r = 1; r < n; ++r) reduce_typed(acc, static_cast<const T*>(in[r]) + c0, m, op);
    if (op == ReduceOp::Avg) finish_avg(acc, m, core::dtype_of<T>, static_cast<int>(n));
    for (void* o : out) std::copy_n(acc, m, static_cast<T*>(o) + c0);
  }
}

void in_order_half(const std::vector<const void*>& in, const std::vector<void*>& out,
                   std::size_t count, core::DType t, ReduceOp op) {
  constexpr std::size_t kChunk = kChunkBytes / sizeof(float);
  alignas(64) float acc[kChunk];
  alignas(64) float x[kChunk];
  const std::size_t n = in.size();
  auto at = [](const void* p, std::size_t first) {
    return static_cast<const std::uint16_t*>(p) + first;
  };
  for (std::size_t c0 = 0; c0 < count; c0 += kChunk) {
    const std::size_t m = std::min(kChunk, count - c0);
    widen_half(at(in[0], c0), acc, m, t);
    for (std::size_t r = 1; r < n; ++r) {
      widen_half(at(in[r], c0), x, m, t);
      reduce_typed(acc, x, m, op);
    }
    if (op == ReduceOp::Avg) finish_avg(acc, m, core::DType::F32, static_cast<int>(n));
    for (void* o : out) narrow_half(acc, static_cast<std::uint16_t*>(o) + c0, m, t);
  }
}

}  // namespace

void reduce_into(void* acc, const void* in, std::size_t n, core::DType t, ReduceOp op) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    reduce_typed(static_cast<T*>(acc), static_cast<const T*>(in), n, op);
  });
}

void finish_avg(void* buf, std::size_t n, core::DType t, int size) {
  if (n == 0) return;
  with_type(t, [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(buf);
    const T divisor = static_cast<T>(size);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / divisor);
  });
}

void widen_half(const void* src, float* dst, std::size_t n, core::DType t) {
  const auto* h = static_cast<const std::uint16_t*>(src);
  for (std::size_t i = 0; i < n; ++i) dst[i] = core::half_to_float(h[i], t);
}

void narrow_half(const float* src, void* dst, std::size_t n, core::DType t) {
  auto* h = static_cast<std::uint16_t*>(dst);
  for (std::size_t i = 0; i < n; ++i) h[i] = core::float_to_half(src[i], t);
}

void reduce_in_order(const std::vector<const void*>& in, const std::vector<void*>& out,
                     std::size_t count, core::DType t, ReduceOp op) {
  TESSERA_CHECK(!in.empty(), "comm reduction: no inputs to reduce");
  if (core::dtype_is_half(t)) return in_order_half(in, out, count, t, op);
  with_type(t, [&](auto z) { in_order_typed<decltype(z)>(in, out, count, op); });
}

}  // namespace tessera::comm::reduction
