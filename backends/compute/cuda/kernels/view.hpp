// View<T>: a POD strided view (data pointer, up to kMaxDims extents and element strides) that
// kernel bodies index by row-major linear index on the host and on the device, and coalesce(),
// which merges the dims a set of same-shape views all store contiguously (fewer divisions per
// element on the GPU). Made from a core::Tensor by make_view (view_host.hpp, host only).
#pragma once

#include <cstdint>

#include "hd.hpp"

namespace tessera::compute::cuda::kernels {

/// The most dims a kernel view holds (core's tensors here have at most 4; halo slabs 4).
inline constexpr int kMaxDims = 6;

/// Elements of a tensor: element (i0, …, i_{ndim−1}) at data[Σ i_d·stride[d]]. Trivially copyable,
/// so a params struct holding views can be passed by value to a __global__ function. T may be
/// const. ndim 0 is a scalar (one element).
template <class T>
struct View {
  T* data = nullptr;
  int ndim = 0;
  std::int64_t shape[kMaxDims] = {};
  std::int64_t stride[kMaxDims] = {};

  /// Product of the extents (1 for ndim 0).
  TESSERA_HD std::int64_t numel() const {
    std::int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    return n;
  }
  /// The element offset of row-major linear index i (last dim fastest), 0 ≤ i < numel().
  TESSERA_HD std::int64_t offset_of(std::int64_t i) const { return offset_from(0, i); }
  /// The offset of row-major index i over dims [first, ndim) alone (the pixel p of an (N,C,P)
  /// tensor is offset_from(2, p)); 0 when first ≥ ndim.
  TESSERA_HD std::int64_t offset_from(int first, std::int64_t i) const {
    std::int64_t off = 0;
    for (int d = ndim - 1; d > first; --d) {
      const std::int64_t q = k_div(i, shape[d]);
      off += (i - q * shape[d]) * stride[d];
      i = q;
    }
    return first < ndim ? off + i * stride[first] : 0;
  }
  /// Product of the extents of dims [first, ndim) (1 when first ≥ ndim).
  TESSERA_HD std::int64_t numel_from(int first) const {
    std::int64_t n = 1;
    for (int d = first; d < ndim; ++d) n *= shape[d];
    return n;
  }
  /// Element (n, c, p) of an (N, C, P…) view (ndim ≥ 2; p row-major over dims 2..).
  TESSERA_HD T& ncp(std::int64_t n, std::int64_t c, std::int64_t p) const {
    return data[n * stride[0] + c * stride[1] + offset_from(2, p)];
  }
  /// The element of row-major linear index i.
  TESSERA_HD T& at(std::int64_t i) const { return data[offset_of(i)]; }
  /// Element i of a 1-d view (a per-channel vector).
  TESSERA_HD T& vec(std::int64_t i) const { return data[i * stride[0]]; }
};

/// Rewrites `count` views of one shape so that each has the fewest dims with the same row-major
/// element order: drops extent-1 dims and merges dim d into d+1 where every view has
/// stride[d] == stride[d+1]·shape[d+1]. Linear index i names the same element before and after.
/// Host code (the dispatch calls it before a pass).
template <class... V>
void coalesce(V&... views) {
  auto& first = [](auto& v, auto&...) -> auto& { return v; }
  (views...);
  const int nd = first.ndim;
  std::int64_t numel = first.numel();
  if (numel == 0) return;  // nothing is indexed; keep the shape as it is
  int out = 0;
  std::int64_t shape[kMaxDims];
  for (int d = 0; d < nd; ++d) {
    const std::int64_t s = first.shape[d];
    if (s == 1) continue;
    const bool merge =
        out > 0 && ((views.stride[d] * s == views.stride[out - 1] ? true : false) && ...);
    if (merge) {
      shape[out - 1] *= s;
      ((views.stride[out - 1] = views.stride[d]), ...);
    } else {
      shape[out] = s;
      ((views.stride[out] = views.stride[d]), ...);
      ++out;
    }
  }
  ((views.ndim = out), ...);
  for (int d = 0; d < out; ++d) ((views.shape[d] = shape[d]), ...);
}

}  // namespace tessera::compute::cuda::kernels
