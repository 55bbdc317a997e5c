// Nearest-neighbour upsampling of (N, C, H, W) views by an integer factor f and its adjoint.
// Forward: one item per output element, y(n,c,oh,ow) = x(n,c,oh/f,ow/f) (reads cached: moves
// 1 + 1/f² elements per output element, ≥ 80% of copy bandwidth). Backward: one item per dx
// element, the sum of its f×f block of dy in T, rows then columns as on the cpu backend (reads
// f² elements per written one; consecutive items read consecutive f-wide runs: ≥ 70%).
#pragma once

#include <cstdint>

#include "hd.hpp"
#include "view.hpp"

namespace tessera::compute::cuda::kernels {

/// (n, c, h, w) of row-major index i over extents (·, C, H, W).
struct Index4 {
  std::int64_t n, c, h, w;
};
TESSERA_HD inline Index4 unravel4(std::int64_t i, std::int64_t C, std::int64_t H, std::int64_t W) {
  Index4 r;
  std::int64_t q = k_div(i, W);
  r.w = i - q * W;
  i = q;
  q = k_div(i, H);
  r.h = i - q * H;
  i = q;
  r.n = k_div(i, C);
  r.c = i - r.n * C;
  return r;
}
template <class T>
TESSERA_HD inline T& at4(const View<T>& v, std::int64_t n, std::int64_t c, std::int64_t h,
                         std::int64_t w) {
  return v.data[n * v.stride[0] + c * v.stride[1] + h * v.stride[2] + w * v.stride[3]];
}

template <class T>
struct UpsampleParams {
  View<const T> src;  // forward: x; backward: dy
  View<T> dst;        // forward: y; backward: dx
  std::int64_t f;
};
template <class T>
struct UpsampleForwardBody {
  static TESSERA_HD void run(const UpsampleParams<T>& q, std::int64_t i) {
    const Index4 o = unravel4(i, q.dst.shape[1], q.dst.shape[2], q.dst.shape[3]);
    at4(q.dst, o.n, o.c, o.h, o.w) = at4(q.src, o.n, o.c, k_div(o.h, q.f), k_div(o.w, q.f));
  }
};
template <class T>
struct UpsampleBackwardBody {
  static TESSERA_HD void run(const UpsampleParams<T>& q, std::int64_t i) {
    const Index4 o = unravel4(i, q.dst.shape[1], q.dst.shape[2], q.dst.shape[3]);
    T s = T(0);
    for (std::int64_t a = 0; a < q.f; ++a)
      for (std::int64_t b = 0; b < q.f; ++b)
        s += at4(q.src, o.n, o.c, o.h * q.f + a, o.w * q.f + b);
    at4(q.dst, o.n, o.c, o.h, o.w) = s;
  }
};
template <class L, class T>
void run_upsample_nearest(L& l, const UpsampleParams<T>& q) {
  l.template pass<UpsampleForwardBody<T>>(q, q.dst.numel());
}
template <class L, class T>
void run_upsample_nearest_backward(L& l, const UpsampleParams<T>& q) {
  l.template pass<UpsampleBackwardBody<T>>(q, q.dst.numel());
}

}  // namespace tessera::compute::cuda::kernels
