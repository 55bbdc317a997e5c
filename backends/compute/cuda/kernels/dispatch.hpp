// run_kernel_op: routes a non-library compute call (core has checked it against the op table) to
// the passes of its kernel, for the call's float dtype, on any launcher (pass.hpp): the host loop
// of the cuda-kernels@host backend and the GPU launcher of the cuda backend share this routing.
// Host code; it includes core's compute headers and compiles under g++ and nvcc alike.
#pragma once

#include <string_view>

#include "pointwise.hpp"
#include "tessera/compute/op_table.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"
#include "view_host.hpp"

namespace tessera::compute::cuda::kernels {

namespace detail_dispatch {

template <class T>
View<const T> in(const OpCall& c, std::string_view name) {
  return make_view<const T>(c.input(name));
}
template <class T>
View<T> out(const OpCall& c, std::string_view name) {
  return make_view<T>(c.output(name));
}

template <class L, class T>
void run_typed(L& l, const OpCall& c, std::string_view who) {
  switch (c.kind) {
    case OpKind::Add:
      return run_add(l, AddParams<T>{in<T>(c, "a"), in<T>(c, "b"), out<T>(c, "y")});
    case OpKind::Conv2dForward:
    case OpKind::Conv2dBackwardData:
    case OpKind::Conv2dBackwardWeight:
    case OpKind::LinearForward:
    case OpKind::LinearBackward:
      throw Unsupported(tessera::detail::cat(who, ": ", op_name(c.kind),
                                             " runs on the GPU through cuDNN/cuBLAS only; the "
                                             "kernels of backends/compute/cuda/kernels do not cover it"));
    default:
      throw Unsupported(tessera::detail::cat(who, ": ", op_name(c.kind), " has no kernel yet"));
  }
}

}  // namespace detail_dispatch

/// Runs `call` on `launcher` (see pass.hpp for the launcher concept). `who` names the backend in
/// errors. Throws Unsupported for the convolutions and linear ops (library calls of the cuda
/// backend) and for a float dtype other than f32/f64.
template <class L>
void run_kernel_op(L& launcher, const OpCall& call, std::string_view who = "cuda") {
  const core::Tensor* lead = float_lead(call);
  TESSERA_ASSERT(lead != nullptr, op_name(call.kind), " call without a float tensor");
  const core::DType dt = lead->dtype();
  if (dt == core::DType::F32) return detail_dispatch::run_typed<L, float>(launcher, call, who);
  if (dt == core::DType::F64) return detail_dispatch::run_typed<L, double>(launcher, call, who);
  throw Unsupported(tessera::detail::cat(
      who, " ", op_name(call.kind), ": dtype ", core::dtype_name(dt), " of ", lead->describe(),
      " is not supported yet (the kernels compute in f32 and f64; bf16/f16 come with a later issue)"));
}

}  // namespace tessera::compute::cuda::kernels
