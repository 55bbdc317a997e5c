// Layer norm's blocked kernels on (N, C, P) views, shared by the f32/f64 calls (ops_layernorm.cpp)
// and the bf16/f16 ones (ops_layernorm_half.cpp). S is the storage of x, y, dy and dx: T itself,
// or std::uint16_t (bf16/f16 of dtype `half`, with T = float), widened row by row as the block is
// staged and rounded once per output row, so a 16-bit call gives the bits of the f32 kernel on
// widened copies. gamma, beta, the statistics and the parameter gradients are T.
#pragma once

#include <type_traits>
#include <vector>

#include "convert.hpp"
#include "ops_common.hpp"
#include "tessera/compute/ops.hpp"

namespace tessera::compute::cpu::ops {

/// The tensors of one forward call; `like` books the per-worker scratch (its allocator).
template <class T, class S>
struct LayerNormForwardArgs {
  Ncp<const S> x;
  Ncp<S> y;
  Ncp<T> mean, rstd;
  const T* gamma = nullptr;
  const T* beta = nullptr;
  double eps = 0;
  core::DType half = core::DType::F32;  ///< S's dtype when S is 16-bit
  const core::Tensor* like = nullptr;
};

/// The tensors of one backward call (dx may alias dy: each block is staged before it is written).
template <class T, class S>
struct LayerNormBackwardArgs {
  Ncp<const S> dy, x;
  Ncp<const T> mean, rstd;
  Ncp<S> dx;
  const T* gamma = nullptr;
  core::DType half = core::DType::F32;
  const core::Tensor* like = nullptr;
};

/// y, mean and rstd of the call, block by block over the pool.
template <class T, class S>
void layernorm_forward_blocks(const LayerNormForwardArgs<T, S>& a, ThreadPool& pool);

/// dx of the call; returns the chunk partials of Σ dy·x̂ (entries [0, C)) and Σ dy ([C, 2C)),
/// in an order fixed by the shapes alone (store_layernorm_grads sums them).
template <class T, class S>
std::vector<double> layernorm_backward_blocks(const LayerNormBackwardArgs<T, S>& a,
                                              ThreadPool& pool);

/// dgamma and dbeta of `call` (T, accumulating when call.accumulate) from the backward's partials.
template <class T>
void store_layernorm_grads(const OpCall& call, const std::vector<double>& part, std::int64_t C);

/// The T values of the `len` elements at `row`: the row itself when S is T, else widened into buf.
template <class T, class S>
inline const T* staged_row(const S* row, T* buf, std::int64_t len, core::DType half) {
  if constexpr (std::is_same_v<S, T>) {
    return row;
  } else {
    cpu::widen(row, buf, len, half);
    return buf;
  }
}

/// Where an output row is computed: the row itself when S is T, else buf (then finish_row).
template <class T, class S>
inline T* out_row(S* row, T* buf) {
  if constexpr (std::is_same_v<S, T>)
    return row;
  else
    return buf;
}

/// Rounds a row computed in buf into the 16-bit row (nothing when S is T).
template <class T, class S>
inline void finish_row(const T* buf, S* row, std::int64_t len, core::DType half) {
  if constexpr (!std::is_same_v<S, T>) cpu::narrow(buf, row, len, half);
}

}  // namespace tessera::compute::cpu::ops
