// Data movement of the local collectives, done by the last rank to arrive: rank-order reductions
// (bit-reproducible) and block copies between the ranks' buffers.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tessera/core/half.hpp"
#include "world_state.hpp"

namespace tessera::comm::local {
namespace {

/// Reductions work through a stack buffer of this many bytes, one chunk of elements at a time, so
/// that an output may alias its own rank's input (in-place all_reduce and reduce_scatter).
constexpr std::size_t kChunkBytes = 16 * 1024;

template <class T>
T add(T a, T b) noexcept {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;  // wraps on overflow instead of undefined behaviour
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

/// acc[i] = acc[i] ⊕ x[i] for m elements (Avg sums; the division comes at the end).
template <class T>
void combine(T* acc, const T* x, std::size_t m, ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      for (std::size_t i = 0; i < m; ++i) acc[i] = add(acc[i], x[i]);
      break;
    case ReduceOp::Max:
      for (std::size_t i = 0; i < m; ++i) acc[i] = x[i] > acc[i] ? x[i] : acc[i];
      break;
    case ReduceOp::Min:
      for (std::size_t i = 0; i < m; ++i) acc[i] = x[i] < acc[i] ? x[i] : acc[i];
      break;
  }
}

/// out[q][i] = in[0][i] ⊕ in[1][i] ⊕ ... ⊕ in[n-1][i], left to right (rank order); Avg divides the
/// sum by n afterwards (integers: truncated toward zero).
template <class T>
void reduce_typed(const std::vector<const void*>& in, const std::vector<void*>& out,
                  std::size_t count, ReduceOp op) {
  constexpr std::size_t kChunk = kChunkBytes / sizeof(T);
  alignas(64) T acc[kChunk];
  const std::size_t n = in.size();
  for (std::size_t c0 = 0; c0 < count; c0 += kChunk) {
    const std::size_t m = std::min(kChunk, count - c0);
    std::copy_n(static_cast<const T*>(in[0]) + c0, m, acc);
    for (std::size_t r = 1; r < n; ++r) combine(acc, static_cast<const T*>(in[r]) + c0, m, op);
    if (op == ReduceOp::Avg) {
      const T divisor = static_cast<T>(n);
      for (std::size_t i = 0; i < m; ++i) acc[i] = acc[i] / divisor;
    }
    for (void* o : out) std::copy_n(acc, m, static_cast<T*>(o) + c0);
  }
}

/// bf16/f16 (raw 16-bit patterns of dtype `dt`): every rank's input widened to f32 (exactly),
/// combined in f32 in rank order as reduce_typed<float> does, Avg divided by n in f32, then
/// rounded to 16 bits once (core/half.hpp's float_to_half). A Sum of n terms is therefore within
/// (n-1)·2^-24·Σ|x_i| + u·|result| of the exact sum (u = unit_roundoff(dt)), and past half_max(dt)
/// it is ±inf; Max and Min return one of the inputs unchanged (NaN aside, which comes out quiet).
void reduce_half(const std::vector<const void*>& in, const std::vector<void*>& out,
                 std::size_t count, core::DType dt, ReduceOp op) {
  constexpr std::size_t kChunk = kChunkBytes / sizeof(float);
  alignas(64) float acc[kChunk];
  alignas(64) float x[kChunk];
  const std::size_t n = in.size();
  auto widen = [dt](const void* src, std::size_t first, std::size_t m, float* dst) {
    const auto* h = static_cast<const std::uint16_t*>(src) + first;
    for (std::size_t i = 0; i < m; ++i) dst[i] = core::half_to_float(h[i], dt);
  };
  for (std::size_t c0 = 0; c0 < count; c0 += kChunk) {
    const std::size_t m = std::min(kChunk, count - c0);
    widen(in[0], c0, m, acc);
    for (std::size_t r = 1; r < n; ++r) {
      widen(in[r], c0, m, x);
      combine(acc, x, m, op);
    }
    if (op == ReduceOp::Avg) {
      const auto divisor = static_cast<float>(n);
      for (std::size_t i = 0; i < m; ++i) acc[i] = acc[i] / divisor;
    }
    for (void* o : out) {
      auto* h = static_cast<std::uint16_t*>(o) + c0;
      for (std::size_t i = 0; i < m; ++i) h[i] = core::float_to_half(acc[i], dt);
    }
  }
}

void reduce(const std::vector<const void*>& in, const std::vector<void*>& out, std::size_t count,
            core::DType dtype, ReduceOp op) {
  switch (dtype) {
    case core::DType::F32:
      return reduce_typed<float>(in, out, count, op);
    case core::DType::F64:
      return reduce_typed<double>(in, out, count, op);
    case core::DType::I32:
      return reduce_typed<std::int32_t>(in, out, count, op);
    case core::DType::I64:
      return reduce_typed<std::int64_t>(in, out, count, op);
    case core::DType::BF16:
    case core::DType::F16:
      return reduce_half(in, out, count, dtype, op);
  }
  TESSERA_ASSERT(false, "reduction of dtype ", static_cast<int>(dtype),
                 " reached the local backend");
}

const std::byte* at(const void* base, std::size_t element, std::size_t elem_bytes) {
  return static_cast<const std::byte*>(base) + element * elem_bytes;
}
std::byte* at(void* base, std::size_t element, std::size_t elem_bytes) {
  return static_cast<std::byte*>(base) + element * elem_bytes;
}

/// memcpy that accepts empty and identical (in-place) ranges.
void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes != 0 && dst != src) std::memcpy(dst, src, bytes);
}

}  // namespace

void perform_collective(const std::vector<CollectiveCall>& calls) {
  const CollectiveCall& c0 = calls.front();
  const std::size_t n = calls.size();
  const std::size_t count = c0.count;
  const std::size_t esize = core::dtype_size(c0.dtype);
  const std::size_t block_bytes = count * esize;
  if (count == 0 && c0.kind != CollectiveKind::Split) return;

  switch (c0.kind) {
    case CollectiveKind::AllReduce: {
      std::vector<const void*> in(n);
      std::vector<void*> out(n);
      for (std::size_t r = 0; r < n; ++r) in[r] = out[r] = calls[r].recv;
      reduce(in, out, count, c0.dtype, *c0.op);
      return;
    }
    case CollectiveKind::ReduceScatter: {
      std::vector<const void*> in(n);
      for (std::size_t q = 0; q < n; ++q) {
        for (std::size_t r = 0; r < n; ++r) in[r] = at(calls[r].send, q * count, esize);
        reduce(in, {calls[q].recv}, count, c0.dtype, *c0.op);
      }
      return;
    }
    case CollectiveKind::AllGather:
      // Block r of every recv comes from rank r.
      for (std::size_t q = 0; q < n; ++q)
        for (std::size_t r = 0; r < n; ++r)
          copy_bytes(at(calls[q].recv, r * count, esize), calls[r].send, block_bytes);
      return;
    case CollectiveKind::Broadcast: {
      const void* src = calls[static_cast<std::size_t>(c0.root)].recv;
      for (std::size_t q = 0; q < n; ++q) copy_bytes(calls[q].recv, src, block_bytes);
      return;
    }
    case CollectiveKind::AllToAll:
      // Block q of rank r's send becomes block r of rank q's recv.
      for (std::size_t q = 0; q < n; ++q)
        for (std::size_t r = 0; r < n; ++r)
          copy_bytes(at(calls[q].recv, r * count, esize), at(calls[r].send, q * count, esize),
                     block_bytes);
      return;
    case CollectiveKind::Barrier:
    case CollectiveKind::Split:
      return;
  }
}

}  // namespace tessera::comm::local
