// bf16/f16 calls on the cpu backend: storage in 16 bits, compute in f32. Every 16-bit tensor of the
// call is widened into an f32 workspace tensor (exact), the f32 kernel runs on the widened call,
// and each 16-bit output is narrowed back once (core/half.hpp's rounding). Master slots already in
// f32 (parameters, their gradients, statistics) pass through untouched.
#include <array>

#include "convert.hpp"
#include "cpu_ops.hpp"
#include "tessera/compute/op_table.hpp"
#include "tessera/core/half.hpp"

namespace tessera::compute::cpu {

using core::DType;
using core::Tensor;

bool is_half_call(const OpCall& call) {
  const Tensor* lead = float_lead(call);
  return call.kind != OpKind::Copy && lead != nullptr && core::dtype_is_half(lead->dtype());
}

void run_widened(const OpCall& call, ThreadPool& pool, const std::function<void(const OpCall&)>& run_f32) {
  // An f32 copy of `t`'s shape, booked as workspace with t's allocator.
  auto workspace = [](const Tensor& t) {
    return Tensor::empty(t.shape(), DType::F32, core::MemCategory::Workspace, t.allocator());
  };
  // Outputs the op reads before writing (accumulated into, or updated in place) start from their
  // current values; the others are written in full by the kernel.
  const bool reads_outputs = call.accumulate || op_spec(call.kind).updates_outputs;
  OpCall wide = call;
  std::array<Tensor, kMaxOpInputs> in_f32;
  std::array<Tensor, kMaxOpOutputs> out_f32;
  for (int i = 0; i < kMaxOpInputs; ++i) {
    const Tensor* t = call.in[std::size_t(i)];
    if (t == nullptr || !core::dtype_is_half(t->dtype())) continue;
    in_f32[std::size_t(i)] = workspace(*t);
    convert_tensor(*t, in_f32[std::size_t(i)], pool);
    wide.in[std::size_t(i)] = &in_f32[std::size_t(i)];
  }
  for (int i = 0; i < kMaxOpOutputs; ++i) {
    Tensor* t = call.out[std::size_t(i)];
    if (t == nullptr || !core::dtype_is_half(t->dtype())) continue;
    out_f32[std::size_t(i)] = workspace(*t);
    if (reads_outputs) convert_tensor(*t, out_f32[std::size_t(i)], pool);
    wide.out[std::size_t(i)] = &out_f32[std::size_t(i)];
  }
  run_f32(wide);
  for (int i = 0; i < kMaxOpOutputs; ++i)
    if (out_f32[std::size_t(i)].defined()) convert_tensor(out_f32[std::size_t(i)], *call.out[std::size_t(i)], pool);
}

}  // namespace tessera::compute::cpu
