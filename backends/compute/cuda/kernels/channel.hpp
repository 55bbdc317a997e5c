// Per-channel ops on (N, C, P…) views (P = the dims after 1, any strides): scale_channels
// (y = x·s, s (C) or (N,C)), its backward (ds (+)= Σ dy·x over the broadcast dims in double, then
// dx = dy·s), channel_sum (y (N,C) = Σ_P x) and channel_broadcast (y (+)= g(n,c)·scale).
// Elementwise passes: one item per element, row-major (consecutive items, consecutive W
// elements); 2 elements moved per element (3 when accumulating): ≥ 80% of copy bandwidth. The sums
// use reduce.hpp (one read of dy and x per element: ≥ 80% of copy bandwidth as well).
#pragma once

#include <cstddef>
#include <cstdint>

#include "half.hpp"
#include "hd.hpp"
#include "reduce.hpp"
#include "view.hpp"

namespace tessera::compute::cuda::kernels {

/// Entry (n, c) of a per-channel (C) or per-sample (N,C) vector.
template <class T>
TESSERA_HD inline T& nc_at(const View<T>& s, std::int64_t n, std::int64_t c) {
  return s.ndim == 2 ? s.data[n * s.stride[0] + c * s.stride[1]] : s.data[c * s.stride[0]];
}

/// (n, c) of row-major index i of an (N, C, P…) tensor with `cp` = C·P, `p` = P.
struct NcOf {
  std::int64_t c = 0, p = 1;
  TESSERA_HD std::int64_t n(std::int64_t i) const { return k_div(i, c * p); }
  TESSERA_HD std::int64_t ch(std::int64_t i) const {
    const std::int64_t plane = k_div(i, p);
    return plane - k_div(plane, c) * c;
  }
};

// ---- scale_channels: y = x·s(n, c) ---------------------------------------------------------
// T computes and holds s and ds (Master slots); S stores x, y, dy, dx (S = Bf16/F16 with
// T = float: loaded widened, stored rounded once).
template <class T, class S = T>
struct ScaleChannelsParams {
  View<const S> x;
  View<const T> s;
  View<S> y;
  NcOf nc;
};
template <class T, class S>
struct ScaleChannelsBody {
  static TESSERA_HD void run(const ScaleChannelsParams<T, S>& q, std::int64_t i) {
    q.y.at(i) = convert<S>(convert<T>(q.x.at(i)) * nc_at(q.s, q.nc.n(i), q.nc.ch(i)));
  }
};
template <class L, class T, class S>
void run_scale_channels(L& l, ScaleChannelsParams<T, S> q) {
  const std::int64_t n = q.x.numel();
  if (n == 0) return;
  q.nc = {q.x.shape[1], q.x.numel_from(2)};
  coalesce(q.x, q.y);
  l.template pass<ScaleChannelsBody<T, S>>(q, n);
}

// ---- scale_channels_backward: ds (+)= Σ dy·x, then dx = dy·s (dx may alias dy) -----------------
template <class T, class S = T>
struct DyXSrc {
  View<const S> dy, x;
  TESSERA_HD void add(std::int64_t n, std::int64_t c, std::int64_t p, double* acc) const {
    acc[0] += double(convert<T>(dy.ncp(n, c, p))) * double(convert<T>(x.ncp(n, c, p)));
  }
};
/// Stores row totals into an (N,C) or (C) T vector: row = n·C + c per plane, c per channel.
template <class T>
struct NcStore {
  View<T> out;
  std::int64_t c;
  bool accumulate;
  TESSERA_HD void store(std::int64_t row, const double* v) const {
    const std::int64_t n = out.ndim == 2 ? k_div(row, c) : 0,
                       ch = out.ndim == 2 ? row - n * c : row;
    T& d = nc_at(out, n, ch);
    d = T((accumulate ? double(d) : 0.0) + v[0]);
  }
};
template <class T, class S = T>
struct ScaleChannelsBackwardParams {
  View<const S> dy, x;
  View<const T> s;
  View<S> dx;  // data null: no dx
  View<T> ds;
  bool accumulate;
};
template <class T, class S>
RowSpace scale_backward_space(const ScaleChannelsBackwardParams<T, S>& q) {
  return {q.x.shape[0], q.x.shape[1], q.x.numel_from(2), q.s.ndim == 2};
}
template <class T, class S>
std::size_t workspace_bytes(const ScaleChannelsBackwardParams<T, S>& q) {
  return row_reduce_bytes<1>(scale_backward_space(q));
}
template <class L, class T, class S>
void run_scale_channels_backward(L& l, const ScaleChannelsBackwardParams<T, S>& q) {
  const RowSpace space = scale_backward_space(q);
  void* ws = l.workspace(workspace_bytes(q));
  run_row_reduce<1>(l, space, DyXSrc<T, S>{q.dy, q.x}, NcStore<T>{q.ds, space.c, q.accumulate}, ws);
  if (q.dx.data) run_scale_channels(l, ScaleChannelsParams<T, S>{q.dy, q.s, q.dx, {}});
}

// ---- channel_sum: y (N,C) = Σ over P of x --------------------------------------------------
template <class T>
struct XSrc {
  View<const T> x;
  TESSERA_HD void add(std::int64_t n, std::int64_t c, std::int64_t p, double* acc) const {
    acc[0] += double(x.ncp(n, c, p));
  }
};
template <class T>
struct ChannelSumParams {
  View<const T> x;
  View<T> y;
};
template <class T>
RowSpace channel_sum_space(const ChannelSumParams<T>& q) {
  return {q.x.shape[0], q.x.shape[1], q.x.numel_from(2), true};
}
template <class T>
std::size_t workspace_bytes(const ChannelSumParams<T>& q) {
  return row_reduce_bytes<1>(channel_sum_space(q));
}
template <class L, class T>
void run_channel_sum(L& l, const ChannelSumParams<T>& q) {
  const RowSpace space = channel_sum_space(q);
  void* ws = l.workspace(workspace_bytes(q));
  run_row_reduce<1>(l, space, XSrc<T>{q.x}, NcStore<T>{q.y, space.c, false}, ws);
}

// ---- channel_broadcast: y (+)= T(g(n,c)·scale) -----------------------------------------------
template <class T>
struct ChannelBroadcastParams {
  View<const T> g;
  View<T> y;
  double scale;
  bool accumulate;
  NcOf nc;
};
template <class T>
struct ChannelBroadcastBody {
  static TESSERA_HD void run(const ChannelBroadcastParams<T>& q, std::int64_t i) {
    const T v = T(double(nc_at(q.g, q.nc.n(i), q.nc.ch(i))) * q.scale);
    T& y = q.y.at(i);
    y = q.accumulate ? y + v : v;
  }
};
template <class L, class T>
void run_channel_broadcast(L& l, ChannelBroadcastParams<T> q) {
  const std::int64_t n = q.y.numel();
  if (n == 0) return;
  q.nc = {q.y.shape[1], q.y.numel_from(2)};
  coalesce(q.y);
  l.template pass<ChannelBroadcastBody<T>>(q, n);
}

}  // namespace tessera::compute::cuda::kernels
