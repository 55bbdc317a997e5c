// run_cpu_op: routes a non-convolution call to its kernel, run_<op name><T> for the call's float
// dtype, by the op list TESSERA_COMPUTE_KERNEL_OPS (core has checked the call against the op table).
#include "cpu_ops.hpp"
#include "ops_common.hpp"
#include "ops_kernels.hpp"
#include "tessera/compute/op_table.hpp"

namespace tessera::compute::cpu {

namespace {

using core::DType;

template <class T>
void run_typed(const OpCall& c, ThreadPool& pool) {
  switch (c.kind) {
#define TESSERA_CPU_KERNEL_CASE(kind, name) \
  case OpKind::kind: return ops::run_##name<T>(c, pool);
    TESSERA_COMPUTE_KERNEL_OPS(TESSERA_CPU_KERNEL_CASE)
#undef TESSERA_CPU_KERNEL_CASE
    default:
      throw Unsupported(detail::cat("cpu: ", op_name(c.kind), " is not one of the non-convolution ops"));
  }
}

}  // namespace

void run_cpu_op(const OpCall& call, ThreadPool& pool) {
  const core::Tensor* lead = float_lead(call);
  TESSERA_ASSERT(lead != nullptr, op_name(call.kind), " call without a float tensor");
  const DType dt = lead->dtype();
  // copy converts between any two float dtypes (bf16/f16 included) itself; T is not used.
  if (call.kind == OpKind::Copy) return ops::run_copy<float>(call, pool);
  if (!core::dtype_is_float(dt))
    throw Unsupported(detail::cat("cpu ", op_name(call.kind), ": dtype ", core::dtype_name(dt), " of ",
                                  lead->describe(), " is not supported (the cpu backend computes in f32 and f64, and in bf16/f16 through f32)"));
  if (dt == DType::F32)
    run_typed<float>(call, pool);
  else
    run_typed<double>(call, pool);
}

}  // namespace tessera::compute::cpu
