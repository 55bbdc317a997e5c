// Deterministic per-row reductions over (N, C, P) tensors, the building block of the per-channel
// sums (batch-norm statistics, channel sums, dgamma/dbeta, Σdy·x of a scale) and of the flat sums
// (Σx², the loss): a partial pass writes tile partials in double, a combine pass adds them in tile
// order and hands the row's K totals to a store. The summation order depends on the sizes alone
// (pass.hpp: tiles_of), so every launcher gives the same bits. Memory-bound: the partial pass
// reads each input element once, the combine pass rows·tiles doubles (≤ kMaxTiles per row), so
// the pair should reach ≥ 80% of the GPU's copy bandwidth for rows·tiles ≫ the GPU's thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hd.hpp"
#include "pass.hpp"

namespace tessera::compute::cuda::kernels {

/// The rows of a reduction over an (N, C, P) index space: per channel (row c sums the N·P terms
/// (n, c, p) for every n, p) or per (n, c) plane (row n·C + c sums its P terms). Term j of a
/// row is (n0 + j / P, c, j % P).
struct RowSpace {
  std::int64_t n = 0, c = 0, p = 0;
  bool per_plane = false;
  TESSERA_HD std::int64_t rows() const { return per_plane ? n * c : c; }
  TESSERA_HD std::int64_t terms() const { return per_plane ? p : n * p; }
};

/// Partial pass of a K-sum reduction: item = row·tiles + t sums the row's terms t, t + tiles, …
/// into partial[k·rows·tiles + item]. Src is a POD with
///   TESSERA_HD void add(std::int64_t n, std::int64_t c, std::int64_t p, double* acc) const
/// adding its K terms of element (n, c, p) to acc[0..K).
template <class Src, int K>
struct RowPartialParams {
  Src src;
  RowSpace space;
  std::int64_t tiles;
  double* partial;
};
template <class Src, int K>
struct RowPartialBody {
  static TESSERA_HD void run(const RowPartialParams<Src, K>& q, std::int64_t item) {
    const std::int64_t row = k_div(item, q.tiles), t = item - row * q.tiles;
    const RowSpace& s = q.space;
    const std::int64_t n0 = s.per_plane ? k_div(row, s.c) : 0,
                       c = s.per_plane ? row - n0 * s.c : row;
    double acc[K] = {};
    const std::int64_t m = s.terms();
    for (std::int64_t j = t; j < m; j += q.tiles) {
      const std::int64_t dn = k_div(j, s.p);
      q.src.add(n0 + dn, c, j - dn * s.p, acc);
    }
    const std::int64_t total = s.rows() * q.tiles;
    for (int k = 0; k < K; ++k) q.partial[k * total + item] = acc[k];
  }
};

/// Combine pass: item = row adds its tiles' partials in order and calls
///   TESSERA_HD void store(std::int64_t row, const double* totals) const
/// of Store (a POD) with the K totals.
template <class Store, int K>
struct RowCombineParams {
  Store store;
  std::int64_t rows, tiles;
  const double* partial;
};
template <class Store, int K>
struct RowCombineBody {
  static TESSERA_HD void run(const RowCombineParams<Store, K>& q, std::int64_t row) {
    double v[K];
    for (int k = 0; k < K; ++k)
      v[k] = sum_tiles(q.partial + k * q.rows * q.tiles + row * q.tiles, q.tiles);
    q.store.store(row, v);
  }
};

/// Workspace bytes of a K-sum reduction over `space`.
template <int K>
std::size_t row_reduce_bytes(const RowSpace& space) {
  return align_up(sizeof(double) * std::size_t(K) * std::size_t(space.rows()) *
                  std::size_t(tiles_of(space.terms())));
}

/// Runs the two passes of a K-sum reduction with `ws` (row_reduce_bytes<K>(space) bytes of
/// workspace). Every row is stored, also when it has no terms (totals 0).
template <int K, class L, class Src, class Store>
void run_row_reduce(L& l, const RowSpace& space, const Src& src, const Store& store, void* ws) {
  const std::int64_t rows = space.rows();
  if (rows == 0) return;
  const std::int64_t tiles = tiles_of(space.terms());
  auto* partial = static_cast<double*>(ws);
  l.template pass<RowPartialBody<Src, K>>(RowPartialParams<Src, K>{src, space, tiles, partial},
                                          rows * tiles);
  l.template pass<RowCombineBody<Store, K>>(RowCombineParams<Store, K>{store, rows, tiles, partial},
                                            rows);
}

}  // namespace tessera::compute::cuda::kernels
