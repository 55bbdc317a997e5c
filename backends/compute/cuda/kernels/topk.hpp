// Top-k gradient compression's three ops (core's topk_select, topk_scatter_add, topk_residual) on
// contiguous f32/f64 buckets, with the cpu backend's contract to the bit
// (backends/compute/cpu/src/ops_topk.cpp): the pair slots are the bucket's width (int32 for f32,
// int64 for f64), k indices ascending, then the k values' bits.
//
// topk_select: acc = grad + scale·residual and each element's magnitude key (an unsigned integer
// that orders like |acc|, every NaN one above +inf) into `order`; then the k-th largest key T by a
// radix select, four bits a round from the top (8 rounds for f32, 16 for f64), each a histogram
// pass over tiles of the keys and one item that picks the digit; then the chosen set — every key
// above T and the first (k − #above) keys equal to T in index order, so that the strict total
// order is |acc| descending, NaN first, then the lower index — written in index order: per
// contiguous chunk its counts, one item for the chunks' output offsets, per chunk its pairs.
// Reads the keys 2·rounds + 2 times: memory-bound, about 20 (f32) and 36 (f64) passes over a
// bucket of keys, with at most kMaxTiles items per pass (deterministic, like every reduction here).
//
// topk_scatter_add: every index checked first (tiles, one item, read back: the caller throws
// before grad is written), grad = 0, then one pass per block (rank) in block order adding its k
// values, so each element is summed in rank order as on the cpu. A block whose indices ascend
// strictly (what topk_select writes) adds with k items; any other runs on one item in slot order.
//
// topk_residual: the k sent indices checked the same way, acc[index] = 0 for each, then
// residual = acc · inv_scale.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "hd.hpp"
#include "pass.hpp"

namespace tessera::compute::cuda::kernels {

/// The pair slot of a bucket of T (an index, or a value's bits): int32 for float, int64 for double.
template <class T>
using TopKSlot = std::conditional_t<std::is_same_v<T, float>, std::int32_t, std::int64_t>;
/// The magnitude key of a T.
template <class T>
using TopKKey = std::make_unsigned_t<TopKSlot<T>>;

/// The magnitude of x as an unsigned integer that orders like |x|, every NaN one value above +inf
/// (IEEE floats without their sign bit order as unsigned integers; NaNs lie above +inf).
template <class T>
TESSERA_HD inline TopKKey<T> topk_key(T x) {
  using U = TopKKey<T>;
  U inf;
  if constexpr (std::is_same_v<T, float>)
    inf = 0x7f800000u;
  else
    inf = 0x7ff0000000000000ull;
  const U u = std::bit_cast<U>(x) & ~(U(1) << (8 * sizeof(U) - 1));
  return u > inf ? U(inf + 1) : u;
}

/// Bits of a key picked per radix round.
inline constexpr int kTopKDigitBits = 4;
inline constexpr int kTopKRadix = 1 << kTopKDigitBits;

/// The threshold search's state (workspace): the key bits fixed so far, their mask, and how many
/// of the keys matching them are still to be taken (after the last round: the ties to take).
template <class U>
struct TopKSearch {
  U prefix, mask;
  std::int64_t need;
};

/// [first, last) of contiguous chunk c of n elements cut into `chunks`.
struct ChunkRange {
  std::int64_t first, last;
};
TESSERA_HD inline ChunkRange chunk_range(std::int64_t n, std::int64_t chunks, std::int64_t c) {
  const std::int64_t len = (n + chunks - 1) / chunks;
  const std::int64_t first = k_min(n, c * len);
  return {first, k_min(n, first + len)};
}

// ---- topk_select -----------------------------------------------------------------------------

template <class T>
struct TopKSelectParams {
  const T* grad;
  const T* residual;
  T* acc;
  TopKKey<T>* keys;    // the op's `order` output: n keys
  TopKSlot<T>* pairs;  // 2k slots
  T scale;
  std::int64_t n, k;
  std::int64_t tiles;   // histogram tiles (strided: tile t reads keys t, t + tiles, …)
  std::int64_t chunks;  // scan chunks (contiguous)
  int shift;            // the current round's digit: bits [shift, shift + kTopKDigitBits)
  std::int64_t* hist;   // tiles × kTopKRadix counts
  TopKSearch<TopKKey<T>>* search;
  std::int64_t* above;        // per chunk: keys above the threshold
  std::int64_t* equal;        // per chunk: keys equal to it
  std::int64_t* offset;       // per chunk: its first pair slot
  std::int64_t* ties_before;  // per chunk: keys equal to the threshold in earlier chunks
};

/// Item i: acc[i] = grad[i] + scale·residual[i] and its key.
template <class T>
struct TopKAccumulateBody {
  static TESSERA_HD void run(const TopKSelectParams<T>& p, std::int64_t i) {
    const T a = p.grad[i] + p.scale * p.residual[i];
    p.acc[i] = a;
    p.keys[i] = topk_key(a);
  }
};

/// One item: nothing fixed yet, k keys to take.
template <class T>
struct TopKSearchInitBody {
  static TESSERA_HD void run(const TopKSelectParams<T>& p, std::int64_t) {
    *p.search = {0, 0, p.k};
  }
};

/// Item t: tile t's histogram of the current digit over the keys that match the fixed bits.
template <class T>
struct TopKHistogramBody {
  static TESSERA_HD void run(const TopKSelectParams<T>& p, std::int64_t t) {
    const TopKSearch<TopKKey<T>> s = *p.search;
    std::int64_t count[kTopKRadix] = {};
    for (std::int64_t i = t; i < p.n; i += p.tiles) {
      const TopKKey<T> key = p.keys[i];
      if ((key & s.mask) == s.prefix) ++count[(key >> p.shift) & (kTopKRadix - 1)];
    }
    for (int d = 0; d < kTopKRadix; ++d) p.hist[t * kTopKRadix + d] = count[d];
  }
};

/// One item: the digit of the k-th largest key (from the top digit down, the first whose count
/// reaches what is still needed), fixed into the search.
template <class T>
struct TopKDigitBody {
  static TESSERA_HD void run(const TopKSelectParams<T>& p, std::int64_t) {
    using U = TopKKey<T>;
    TopKSearch<U> s = *p.search;
    int digit = 0;  // reached only if the counts were wrong: the search stays on the matching keys
    for (int d = kTopKRadix - 1; d >= 0; --d) {
      std::int64_t c = 0;
      for (std::int64_t t = 0; t < p.tiles; ++t) c += p.hist[t * kTopKRadix + d];
      if (c >= s.need) {
        digit = d;
        break;
      }
      s.need -= c;
    }
    s.prefix |= U(digit) << p.shift;
    s.mask |= U(kTopKRadix - 1) << p.shift;
    *p.search = s;
  }
};

/// Item c: chunk c's keys above the threshold and equal to it.
template <class T>
struct TopKChunkCountBody {
  static TESSERA_HD void run(const TopKSelectParams<T>& p, std::int64_t c) {
    const TopKKey<T> th = p.search->prefix;
    const ChunkRange r = chunk_range(p.n, p.chunks, c);
    std::int64_t above = 0, equal = 0;
    for (std::int64_t i = r.first; i < r.last; ++i) {
      above += p.keys[i] > th;
      equal += p.keys[i] == th;
    }
    p.above[c] = above;
    p.equal[c] = equal;
  }
};

/// One item: each chunk's first pair slot and the ties of the chunks before it.
template <class T>
struct TopKChunkOffsetBody {
  static TESSERA_HD void run(const TopKSelectParams<T>& p, std::int64_t) {
    const std::int64_t need = p.search->need;
    std::int64_t out = 0, ties = 0;
    for (std::int64_t c = 0; c < p.chunks; ++c) {
      p.offset[c] = out;
      p.ties_before[c] = ties;
      const std::int64_t left = need - ties;
      out += p.above[c] + k_min(p.equal[c], left > 0 ? left : std::int64_t{0});
      ties += p.equal[c];
    }
  }
};

/// Item c: chunk c's chosen elements, in index order, into their pair slots.
template <class T>
struct TopKWriteBody {
  static TESSERA_HD void run(const TopKSelectParams<T>& p, std::int64_t c) {
    const TopKKey<T> th = p.search->prefix;
    const std::int64_t need = p.search->need;
    const ChunkRange r = chunk_range(p.n, p.chunks, c);
    std::int64_t j = p.offset[c], ties = p.ties_before[c];
    for (std::int64_t i = r.first; i < r.last; ++i) {
      const TopKKey<T> key = p.keys[i];
      if (key < th || (key == th && ties++ >= need)) continue;
      p.pairs[j] = TopKSlot<T>(i);
      p.pairs[p.k + j] = std::bit_cast<TopKSlot<T>>(p.acc[i]);
      ++j;
    }
  }
};

/// The workspace layout of a topk_select call.
struct TopKSelectLayout {
  std::size_t search_off = 0, chunks_off = 0, total = 0;
};
template <class T>
TopKSelectLayout topk_select_layout(const TopKSelectParams<T>& p) {
  TopKSelectLayout s;
  s.search_off = align_up(sizeof(std::int64_t) * std::size_t(p.tiles * kTopKRadix));
  s.chunks_off = s.search_off + align_up(sizeof(TopKSearch<TopKKey<T>>));
  s.total = s.chunks_off + 4 * align_up(sizeof(std::int64_t) * std::size_t(p.chunks));
  return s;
}

/// Runs topk_select (1 ≤ k ≤ n, contiguous buckets: core's checks).
template <class L, class T>
void run_topk_select(L& l, TopKSelectParams<T> p) {
  p.tiles = tiles_of(p.n);
  p.chunks = tiles_of(p.n);
  const TopKSelectLayout s = topk_select_layout(p);
  auto* ws = static_cast<unsigned char*>(l.workspace(s.total));
  p.hist = reinterpret_cast<std::int64_t*>(ws);
  p.search = reinterpret_cast<TopKSearch<TopKKey<T>>*>(ws + s.search_off);
  const std::size_t per_chunk = align_up(sizeof(std::int64_t) * std::size_t(p.chunks));
  p.above = reinterpret_cast<std::int64_t*>(ws + s.chunks_off);
  p.equal = reinterpret_cast<std::int64_t*>(ws + s.chunks_off + per_chunk);
  p.offset = reinterpret_cast<std::int64_t*>(ws + s.chunks_off + 2 * per_chunk);
  p.ties_before = reinterpret_cast<std::int64_t*>(ws + s.chunks_off + 3 * per_chunk);
  l.template pass<TopKAccumulateBody<T>>(p, p.n);
  l.template pass<TopKSearchInitBody<T>>(p, 1);
  constexpr int kBits = 8 * int(sizeof(TopKKey<T>));
  for (p.shift = kBits - kTopKDigitBits; p.shift >= 0; p.shift -= kTopKDigitBits) {
    l.template pass<TopKHistogramBody<T>>(p, p.tiles);
    l.template pass<TopKDigitBody<T>>(p, 1);
  }
  l.template pass<TopKChunkCountBody<T>>(p, p.chunks);
  l.template pass<TopKChunkOffsetBody<T>>(p, 1);
  l.template pass<TopKWriteBody<T>>(p, p.chunks);
}

// ---- the index check of topk_scatter_add and topk_residual -------------------------------------

/// `blocks` blocks of 2k slots (k indices, then k values) checked against a bucket of n elements.
/// result: {block, slot, index} of the first index outside [0, n) in (block, slot) order (−1:
/// none), then per block 1 when its indices ascend strictly, else 0.
template <class I>
struct TopKIndexCheckParams {
  const I* slots;
  std::int64_t n, k, blocks;
  std::int64_t tiles;           // contiguous chunks of a block's k indices: tiles_of(k)
  std::int64_t* tile_bad;       // blocks × tiles: the tile's first bad slot, or −1
  std::int64_t* tile_unsorted;  // blocks × tiles: 1 when an index is not above its predecessor
  std::int64_t* result;         // 3 + blocks
};

/// Item q·tiles + t: tile t of block q.
template <class I>
struct TopKIndexTileBody {
  static TESSERA_HD void run(const TopKIndexCheckParams<I>& p, std::int64_t item) {
    const std::int64_t q = k_div(item, p.tiles), t = item - q * p.tiles;
    const I* idx = p.slots + q * 2 * p.k;
    const ChunkRange r = chunk_range(p.k, p.tiles, t);
    std::int64_t bad = -1, unsorted = 0;
    for (std::int64_t j = r.first; j < r.last; ++j) {
      if (bad < 0 && (idx[j] < 0 || idx[j] >= p.n)) bad = j;
      if (j > 0 && idx[j] <= idx[j - 1]) unsorted = 1;
    }
    p.tile_bad[item] = bad;
    p.tile_unsorted[item] = unsorted;
  }
};

/// One item: the first bad index over the tiles in order, and each block's order flag.
template <class I>
struct TopKIndexCombineBody {
  static TESSERA_HD void run(const TopKIndexCheckParams<I>& p, std::int64_t) {
    p.result[0] = p.result[1] = p.result[2] = -1;
    for (std::int64_t q = 0; q < p.blocks; ++q) {
      std::int64_t sorted = 1;
      for (std::int64_t t = 0; t < p.tiles; ++t) {
        const std::int64_t b = p.tile_bad[q * p.tiles + t];
        if (b >= 0 && p.result[0] < 0) {
          p.result[0] = q;
          p.result[1] = b;
          p.result[2] = std::int64_t(p.slots[q * 2 * p.k + b]);
        }
        if (p.tile_unsorted[q * p.tiles + t]) sorted = 0;
      }
      p.result[3 + q] = sorted;
    }
  }
};

/// The first index outside the bucket (block −1: none).
struct TopKBadIndex {
  std::int64_t block = -1, slot = -1, index = -1;
};

/// Workspace bytes of the index check.
template <class I>
std::size_t topk_index_check_bytes(const TopKIndexCheckParams<I>& p) {
  return 2 * align_up(sizeof(std::int64_t) * std::size_t(p.blocks * p.tiles)) +
         align_up(sizeof(std::int64_t) * std::size_t(3 + p.blocks));
}

/// Runs the index check in workspace `ws` (topk_index_check_bytes) and reads its verdict back.
template <class L, class I>
TopKBadIndex run_topk_index_check(L& l, TopKIndexCheckParams<I>& p, unsigned char* ws) {
  const std::size_t per = align_up(sizeof(std::int64_t) * std::size_t(p.blocks * p.tiles));
  p.tile_bad = reinterpret_cast<std::int64_t*>(ws);
  p.tile_unsorted = reinterpret_cast<std::int64_t*>(ws + per);
  p.result = reinterpret_cast<std::int64_t*>(ws + 2 * per);
  l.template pass<TopKIndexTileBody<I>>(p, p.blocks * p.tiles);
  l.template pass<TopKIndexCombineBody<I>>(p, 1);
  TopKBadIndex bad;
  l.read_back(&bad, p.result, sizeof bad);
  return bad;
}

// ---- topk_scatter_add ---------------------------------------------------------------------------

template <class T>
struct TopKScatterParams {
  const TopKSlot<T>* recv;
  T* grad;
  std::int64_t n, k;
  std::int64_t block;          // the block the add pass adds
  const std::int64_t* sorted;  // per block: its indices ascend strictly
};

/// Item i: grad[i] = 0.
template <class T>
struct TopKZeroBody {
  static TESSERA_HD void run(const TopKScatterParams<T>& p, std::int64_t i) { p.grad[i] = T(0); }
};

/// Item j of block q: grad[index j] += value j where the block's indices are distinct (strictly
/// ascending); else item 0 adds the whole block in slot order.
template <class T>
struct TopKScatterBlockBody {
  static TESSERA_HD void run(const TopKScatterParams<T>& p, std::int64_t j) {
    const TopKSlot<T>* b = p.recv + p.block * 2 * p.k;
    if (p.sorted[p.block]) {
      p.grad[b[j]] += std::bit_cast<T>(b[p.k + j]);
    } else if (j == 0) {
      for (std::int64_t i = 0; i < p.k; ++i) p.grad[b[i]] += std::bit_cast<T>(b[p.k + i]);
    }
  }
};

/// Runs topk_scatter_add over `blocks` blocks. Returns the first index outside the bucket (block
/// −1: none); when there is one, nothing was written and the caller throws.
template <class L, class T>
TopKBadIndex run_topk_scatter_add(L& l, TopKScatterParams<T> p, std::int64_t blocks) {
  TopKIndexCheckParams<TopKSlot<T>> c{p.recv,        p.n,     p.k,     blocks,
                                      tiles_of(p.k), nullptr, nullptr, nullptr};
  auto* ws = static_cast<unsigned char*>(l.workspace(topk_index_check_bytes(c)));
  const TopKBadIndex bad = run_topk_index_check(l, c, ws);
  if (bad.block >= 0) return bad;
  p.sorted = c.result + 3;
  l.template pass<TopKZeroBody<T>>(p, p.n);
  for (p.block = 0; p.block < blocks; ++p.block) l.template pass<TopKScatterBlockBody<T>>(p, p.k);
  return bad;
}

// ---- topk_residual ------------------------------------------------------------------------------

template <class T>
struct TopKResidualParams {
  const TopKSlot<T>* sent;
  T* acc;
  T* residual;
  T inv_scale;
  std::int64_t n, k;
};

/// Item j: acc[sent index j] = 0 (a repeated index writes the same zero twice).
template <class T>
struct TopKClearSentBody {
  static TESSERA_HD void run(const TopKResidualParams<T>& p, std::int64_t j) {
    p.acc[p.sent[j]] = T(0);
  }
};

/// Item i: residual[i] = acc[i] · inv_scale.
template <class T>
struct TopKResidualBody {
  static TESSERA_HD void run(const TopKResidualParams<T>& p, std::int64_t i) {
    p.residual[i] = p.acc[i] * p.inv_scale;
  }
};

/// Runs topk_residual. Returns the first sent index outside the bucket (block −1: none); when
/// there is one, nothing was written and the caller throws.
template <class L, class T>
TopKBadIndex run_topk_residual(L& l, const TopKResidualParams<T>& p) {
  TopKIndexCheckParams<TopKSlot<T>> c{p.sent,        p.n,     p.k,     1,
                                      tiles_of(p.k), nullptr, nullptr, nullptr};
  auto* ws = static_cast<unsigned char*>(l.workspace(topk_index_check_bytes(c)));
  const TopKBadIndex bad = run_topk_index_check(l, c, ws);
  if (bad.block >= 0) return bad;
  l.template pass<TopKClearSentBody<T>>(p, p.k);
  l.template pass<TopKResidualBody<T>>(p, p.n);
  return bad;
}

}  // namespace tessera::compute::cuda::kernels
