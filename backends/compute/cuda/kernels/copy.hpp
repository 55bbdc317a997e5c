// Copies between views of one shape, any strides: copy (y = x converted to y's element type by
// half.hpp's convert<D>: f32/f64/bf16/f16 in any pair, rounded to nearest), the same-dtype raw
// copy behind Tensor::copy_from and the halo pack/unpack of strided slabs (elements moved as words
// of their size, so any dtype), the add behind Tensor::add_from (dst += src in dst's compute type,
// rounded once; src may be 16-bit added into f32, the widening add of a weight gradient) and fill
// (every element = value). One item per element, row-major after coalesce (contiguous runs merge
// into one dim). Memory-bound: 2 elements moved per element (fill 1, add 3): ≥ 80% of the GPU's
// copy bandwidth for unit-stride inner dims.
#pragma once

#include <cstdint>

#include "half.hpp"
#include "hd.hpp"
#include "view.hpp"

namespace tessera::compute::cuda::kernels {

/// y = D(x) (S → D; the same type for a plain copy).
template <class S, class D>
struct CopyParams {
  View<const S> x;
  View<D> y;
};
template <class S, class D>
struct CopyBody {
  static TESSERA_HD void run(const CopyParams<S, D>& q, std::int64_t i) {
    q.y.at(i) = convert<D>(q.x.at(i));
  }
};
template <class L, class S, class D>
void run_copy(L& l, CopyParams<S, D> q) {
  coalesce(q.x, q.y);
  l.template pass<CopyBody<S, D>>(q, q.y.numel());
}

/// dst += src, computed in A = ComputeOf<D> (f32 for a 16-bit dst) and rounded once into dst.
template <class T, class S = T>
struct AddIntoParams {
  View<const S> src;
  View<T> dst;
};
template <class T, class S>
struct AddIntoBody {
  static TESSERA_HD void run(const AddIntoParams<T, S>& q, std::int64_t i) {
    using A = ComputeOf<T>;
    T& d = q.dst.at(i);
    d = convert<T>(convert<A>(d) + convert<A>(q.src.at(i)));
  }
};
template <class L, class T, class S>
void run_add_into(L& l, AddIntoParams<T, S> q) {
  coalesce(q.src, q.dst);
  l.template pass<AddIntoBody<T, S>>(q, q.dst.numel());
}

/// Every element of y = value.
template <class T>
struct FillParams {
  View<T> y;
  T value;
};
template <class T>
struct FillBody {
  static TESSERA_HD void run(const FillParams<T>& q, std::int64_t i) { q.y.at(i) = q.value; }
};
template <class L, class T>
void run_fill(L& l, FillParams<T> q) {
  coalesce(q.y);
  l.template pass<FillBody<T>>(q, q.y.numel());
}

}  // namespace tessera::compute::cuda::kernels
