// Top-k gradient compression's kernels on contiguous f32/f64 buckets: the accumulate and select
// (nth_element under a strict total order, so the chosen set does not depend on how it proceeds),
// the scatter-add of every rank's pairs in rank order, and the residual. The pair slots are the
// bucket's width: int32 for float, int64 for double (an index, or a value's bits).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ops_common.hpp"
#include "ops_kernels.hpp"

namespace tessera::compute::cpu::ops {

namespace {

template <class T>
using Slot = std::conditional_t<std::is_same_v<T, float>, std::int32_t, std::int64_t>;
static_assert(sizeof(Slot<float>) == sizeof(float) && sizeof(Slot<double>) == sizeof(double));

}  // namespace

template <class T>
void run_topk_select(const OpCall& call, ThreadPool& pool) {
  using I = Slot<T>;
  const T* g = call.input("grad").data<T>();
  const T* r = call.input("residual").data<T>();
  T* acc = call.output("acc").data<T>();
  I* order = call.output("order").data<I>();
  I* pairs = call.output("pairs").data<I>();
  const std::int64_t n = call.input("grad").numel(), k = call.integer("k");
  const T s = static_cast<T>(call.scalar("scale"));
  parallel_flat(pool, n, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) acc[i] = g[i] + s * r[i];
  });
  for (std::int64_t i = 0; i < n; ++i) order[i] = static_cast<I>(i);
  // Larger |acc| first, NaN before every number, then the lower index: a strict total order.
  auto before = [acc](I a, I b) {
    const T x = std::abs(acc[a]), y = std::abs(acc[b]);
    const bool xn = std::isnan(x), yn = std::isnan(y);
    if (xn != yn) return xn;
    if (!xn && x != y) return x > y;
    return a < b;
  };
  if (k < n) std::nth_element(order, order + k, order + n, before);
  std::sort(order, order + k);
  for (std::int64_t j = 0; j < k; ++j) {
    pairs[j] = order[j];
    std::memcpy(&pairs[k + j], &acc[order[j]], sizeof(T));
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
