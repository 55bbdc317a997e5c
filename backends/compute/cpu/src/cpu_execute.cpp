// CpuBackend::execute: routes each op to the convolution paths or to the other CPU kernels;
// bf16/f16 calls run in f32: depthwise and pointwise convolutions row or block by block
// (conv_half.cpp), layer norm block by block (ops_layernorm_half.cpp), the channel and sample
// scales in chunks (ops_scale_half.cpp), the others through run_widened (half_calls.cpp).
#include "cpu_ops.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/compute/op_table.hpp"
#include "tessera/core/error.hpp"

namespace tessera::compute::cpu {

void CpuBackend::execute(const OpCall& call) {
  for (const core::Tensor* t : call.in)
    TESSERA_CHECK(t == nullptr || !t->is_meta(), "cpu ", op_name(call.kind), ": input ", t->describe(),
                  " is a meta tensor (no data); meta runs need a recording backend, not cpu");
  for (const core::Tensor* t : call.out)
    TESSERA_CHECK(t == nullptr || !t->is_meta(), "cpu ", op_name(call.kind), ": output ", t->describe(),
                  " is a meta tensor (no data); meta runs need a recording backend, not cpu");
  if (is_half_call(call)) {
    const core::DType dt = float_lead(call)->dtype();
    if (algo_ == ConvAlgo::Onednn && compute::is_conv(call.kind) && !onednn_runs(dt))
      throw InvalidArgument(tessera::detail::cat(
          "cpu ", op_name(call.kind), ": algorithm 'onednn' does not apply to a ",
          core::dtype_name(dt),
          " call here: it needs dtype f32, or bf16 on a CPU with bf16 instructions (",
          onednn_info().built ? onednn_info().why_not_bf16 : "a build with oneDNN",
          "); force another algorithm or use ConvAlgo::Auto"));
    if (run_half_conv(call, pool(), onednn(), algo_)) return;
    if (run_half_norm(call, pool())) return;
    if (run_half_scale(call, pool())) return;
    return run_widened(call, pool(), [this](const OpCall& c) { execute(c); });
  }
  switch (call.kind) {
    case OpKind::Conv2dForward:
      conv2d_forward(call.conv, call.input("x"), call.input("w"), call.input_if("bias"), call.output("y"));
      return;
    case OpKind::Conv2dBackwardData:
      conv2d_backward_data(call.conv, call.input("dy"), call.input("w"), call.output("dx"), call.accumulate);
      return;
    case OpKind::Conv2dBackwardWeight:
      conv2d_backward_weight(call.conv, call.input("x"), call.input("dy"), call.output("dw"), call.output_if("db"),
                             call.accumulate);
      return;
    default: run_cpu_op(call, pool());
  }
}

}  // namespace tessera::compute::cpu
