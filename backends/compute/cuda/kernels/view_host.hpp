// make_view: a kernel View of a core::Tensor (its first element's address, shape and element
// strides). Host code; it includes core, so .cu files include it only from their host parts.
#pragma once

#include <type_traits>

#include "half.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"
#include "view.hpp"

namespace tessera::compute::cuda::kernels {

/// The dtype a kernel element type stands for: float F32, double F64, Bf16 BF16, F16 F16,
/// std::int64_t I64.
template <class E>
constexpr core::DType kernel_dtype() {
  if constexpr (std::is_same_v<E, Bf16>)
    return core::DType::BF16;
  else if constexpr (std::is_same_v<E, F16>)
    return core::DType::F16;
  else
    return core::dtype_of<E>;
}

/// The view of `t` with element type T (T may be const; kernel_dtype<T> must be t's dtype).
/// Throws InvalidArgument for a tensor of more than kMaxDims dims.
template <class T>
View<T> make_view(const core::Tensor& t) {
  using E = std::remove_const_t<T>;
  TESSERA_CHECK(t.ndim() <= kMaxDims, "cuda kernels: tensor ", t.describe(), " has ", t.ndim(),
                " dims; the kernels take at most ", kMaxDims, " (reshape it first)");
  TESSERA_CHECK(kernel_dtype<E>() == t.dtype(), "cuda kernels: tensor ", t.describe(),
                " viewed as ", core::dtype_name(kernel_dtype<E>()), " elements");
  View<T> v;
  // raw_data, not data<E>: the address may be a device pointer, which the host never dereferences.
  v.data = t.numel() > 0 ? static_cast<T*>(t.raw_data()) : nullptr;
  v.ndim = t.ndim();
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = t.size(d);
    v.stride[d] = t.stride(d);
  }
  return v;
}

/// The view of `t` as words W of its element size (the raw copies and fills of any dtype).
template <class W>
View<W> make_raw_view(const core::Tensor& t) {
  TESSERA_CHECK(t.ndim() <= kMaxDims, "cuda kernels: tensor ", t.describe(), " has ", t.ndim(),
                " dims; the kernels take at most ", kMaxDims, " (reshape it first)");
  TESSERA_CHECK(core::dtype_size(t.dtype()) == sizeof(W), "cuda kernels: tensor ", t.describe(),
                " has ", core::dtype_size(t.dtype()), "-byte elements, not ", sizeof(W));
  View<W> v;
  v.data = t.numel() > 0 ? static_cast<W*>(t.raw_data()) : nullptr;
  v.ndim = t.ndim();
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = t.size(d);
    v.stride[d] = t.stride(d);
  }
  return v;
}

}  // namespace tessera::compute::cuda::kernels
