// Top-k gradient compression's kernels on contiguous f32/f64 buckets: the accumulate and select
// (a threshold from nth_element over integer magnitude keys, then a scan in index order: the
// chosen set is that of a strict total order, whatever nth_element does),
// the scatter-add of every rank's pairs in rank order, and the residual. The pair slots are the
// bucket's width: int32 for float, int64 for double (an index, or a value's bits).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

#include "ops_common.hpp"
#include "ops_kernels.hpp"

namespace tessera::compute::cpu::ops {

namespace {

template <class T>
using Slot = std::conditional_t<std::is_same_v<T, float>, std::int32_t, std::int64_t>;
static_assert(sizeof(Slot<float>) == sizeof(float) && sizeof(Slot<double>) == sizeof(double));

}  // namespace

/// The magnitude of x as an unsigned integer that orders like |x|, with every NaN one value above
/// +inf: IEEE floats without their sign bit order as unsigned integers, and NaNs lie above +inf.
template <class T>
std::make_unsigned_t<Slot<T>> magnitude_key(T x) {
  using U = std::make_unsigned_t<Slot<T>>;
  constexpr U kSign = U(1) << (8 * sizeof(U) - 1);
  constexpr U kInf = std::is_same_v<T, float> ? U(0x7f800000u) : U(0x7ff0000000000000ull);
  U u;
  std::memcpy(&u, &x, sizeof u);
  u &= ~kSign;
  return u > kInf ? kInf + 1 : u;  // one NaN: they tie with each other, and go to the lower index
}

// The k largest |acc| (NaN first, ties to the lower index), as a threshold: nth_element over the
// keys in `order` (contiguous integers, no indirection) gives the k-th largest key T; then one scan
// in index order takes every key above T and the first (k - #above) keys equal to T, so the
// indices come out ascending.
template <class T>
void run_topk_select(const OpCall& call, ThreadPool& pool) {
  using I = Slot<T>;
  using U = std::make_unsigned_t<I>;
  const T* g = call.input("grad").data<T>();
  const T* r = call.input("residual").data<T>();
  T* acc = call.output("acc").data<T>();
  U* keys = reinterpret_cast<U*>(call.output("order").data<I>());
  I* pairs = call.output("pairs").data<I>();
  const std::int64_t n = call.input("grad").numel(), k = call.integer("k");
  const T s = static_cast<T>(call.scalar("scale"));
  parallel_flat(pool, n, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      acc[i] = g[i] + s * r[i];
      keys[i] = magnitude_key(acc[i]);
    }
  });
  std::nth_element(keys, keys + (k - 1), keys + n, std::greater<U>());
  const U t = keys[k - 1];
  // Everything after position k-1 is <= t, so the keys above t are among the first k-1.
  std::int64_t ties = k;
  for (std::int64_t j = 0; j < k - 1; ++j) ties -= keys[j] > t;
  std::int64_t j = 0;
  for (std::int64_t i = 0; i < n && j < k; ++i) {
    const U key = magnitude_key(acc[i]);
    if (key < t || (key == t && ties == 0)) continue;
    if (key == t) --ties;
    pairs[j] = static_cast<I>(i);
    std::memcpy(&pairs[k + j], &acc[i], sizeof(T));
    ++j;
  }
}

template <class T>
void run_topk_scatter_add(const OpCall& call, ThreadPool& pool) {
  using I = Slot<T>;
  const core::Tensor& recv = call.input("recv");
  const I* in = recv.data<I>();
  T* grad = call.output("grad").data<T>();
  const std::int64_t n = call.output("grad").numel(), k = call.integer("k");
  const std::int64_t blocks = recv.numel() / (2 * k);
  // Every index first: a corrupted buffer is refused before grad is written.
  for (std::int64_t q = 0; q < blocks; ++q)
    for (std::int64_t j = 0; j < k; ++j) {
      const I idx = in[q * 2 * k + j];
      TESSERA_CHECK(idx >= 0 && idx < n, "topk_scatter_add: block ", q, " (rank ", q, " of the group) holds index ",
                    idx, " outside the bucket of ", n, " elements: a corrupted pair buffer");
    }
  parallel_flat(pool, n, [&](std::int64_t b, std::int64_t e) { std::fill(grad + b, grad + e, T(0)); });
  for (std::int64_t q = 0; q < blocks; ++q) {
    const I* block = in + q * 2 * k;
    for (std::int64_t j = 0; j < k; ++j) {
      T v;
      std::memcpy(&v, &block[k + j], sizeof(T));
      grad[block[j]] += v;
    }
  }
}

template <class T>
void run_topk_residual(const OpCall& call, ThreadPool& pool) {
  using I = Slot<T>;
  const core::Tensor& sent = call.input("sent");
  const I* idx = sent.data<I>();
  T* acc = call.output("acc").data<T>();
  T* r = call.output("residual").data<T>();
  const std::int64_t n = call.output("acc").numel(), k = sent.numel() / 2;
  for (std::int64_t j = 0; j < k; ++j)
    TESSERA_CHECK(idx[j] >= 0 && idx[j] < n, "topk_residual: sent index ", idx[j], " outside the bucket of ", n,
                  " elements");
  for (std::int64_t j = 0; j < k; ++j) acc[idx[j]] = T(0);
  const T inv = static_cast<T>(call.scalar("inv_scale"));
  parallel_flat(pool, n, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) r[i] = acc[i] * inv;
  });
}

#define TESSERA_INSTANTIATE(T)                                          \
  template void run_topk_select<T>(const OpCall&, ThreadPool&);      \
  template void run_topk_scatter_add<T>(const OpCall&, ThreadPool&); \
  template void run_topk_residual<T>(const OpCall&, ThreadPool&);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::compute::cpu::ops
