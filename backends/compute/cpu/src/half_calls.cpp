// bf16/f16 calls on the cpu backend: storage in 16 bits, compute in f32. Every 16-bit tensor of the
// call is widened into an f32 workspace tensor (exact), the f32 kernel runs on the widened call,
// and each 16-bit output is narrowed back once (core/half.hpp's rounding). Master slots already in
// f32 (parameters, their gradients, statistics) pass through untouched. Elementwise ops whose
// tensors are all 16-bit and contiguous go chunk by chunk instead, through f32 buffers that stay
// in cache: the same bits, a third of the memory traffic.
#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include "convert.hpp"
#include "thread_pool.hpp"
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

namespace {

// Elements per chunk of the flat path: 128 KiB of f32 per tensor, in L2 beside the others.
constexpr std::int64_t kFlatChunk = 1 << 15;

// Ops whose every output element depends on the inputs' elements at the same index only, so that
// any flat chunking of the call gives the bits of the whole call.
bool is_flat_elementwise(OpKind k) {
  return k == OpKind::ActivationForward || k == OpKind::ActivationBackward || k == OpKind::Add ||
         k == OpKind::Axpy || k == OpKind::Scale;
}

// The flat path applies: an elementwise op, every tensor 16-bit of one dtype, contiguous, of one
// element count.
bool flat_applies(const OpCall& call) {
  if (!is_flat_elementwise(call.kind)) return false;
  const Tensor* lead = float_lead(call);
  std::int64_t n = -1;
  auto ok = [&](const Tensor* t) {
    if (t == nullptr) return true;
    if (t->dtype() != lead->dtype() || !t->is_contiguous()) return false;
    if (n < 0) n = t->numel();
    return t->numel() == n;
  };
  for (const Tensor* t : call.in)
    if (!ok(t)) return false;
  for (const Tensor* t : call.out)
    if (!ok(t)) return false;
  return n > kFlatChunk;  // smaller calls fit in cache widened whole
}

// Per chunk: widens the chunk of every 16-bit tensor (outputs too where the op reads them before
// writing, in place or accumulating), runs the f32 kernel on the chunk, narrows the outputs'
// chunks. The chunks are spread over the pool, each worker running the kernel itself on its own
// f32 buffers (a one-thread pool runs inline): one wake-up of the pool per call, not per chunk.
// Aliased tensors are safe: a chunk is read before it is written, and chunks do not overlap.
void run_flat(const OpCall& call, ThreadPool& pool) {
  const Tensor* lead = float_lead(call);
  const DType dt = lead->dtype();
  const std::int64_t n = lead->numel();
  // One chunk buffer per tensor of the call and worker: slot[i] numbers the call's tensors
  // (inputs, then outputs).
  std::array<int, kMaxOpInputs + kMaxOpOutputs> slot{};
  int slots = 0;
  for (int i = 0; i < kMaxOpInputs; ++i)
    if (call.in[std::size_t(i)]) slot[std::size_t(i)] = slots++;
  for (int i = 0; i < kMaxOpOutputs; ++i)
    if (call.out[std::size_t(i)]) slot[std::size_t(kMaxOpInputs + i)] = slots++;
  const int workers = pool.size();
  Tensor buffers = Tensor::empty({std::int64_t(workers) * slots * kFlatChunk}, DType::F32,
                                 core::MemCategory::Workspace, lead->allocator());
  std::vector<std::unique_ptr<ThreadPool>> inline_pools;
  for (int w = 0; w < workers; ++w) inline_pools.push_back(std::make_unique<ThreadPool>(1));
  const bool reads_outputs = call.accumulate || op_spec(call.kind).updates_outputs;
  const int chunks = static_cast<int>((n + kFlatChunk - 1) / kFlatChunk);
  pool.run(chunks, [&](int chunk, int worker) {
    const std::int64_t b = std::int64_t(chunk) * kFlatChunk, len = std::min(kFlatChunk, n - b);
    std::array<Tensor, kMaxOpInputs> in_view;
    std::array<Tensor, kMaxOpOutputs> out_view;
    auto buffer = [&](int i) {
      return buffers.narrow(0, (std::int64_t(worker) * slots + slot[std::size_t(i)]) * kFlatChunk, len);
    };
    auto at = [&](const Tensor& t) { return static_cast<std::uint16_t*>(t.raw_data()) + b; };
    OpCall wide = call;
    for (int i = 0; i < kMaxOpInputs; ++i)
      if (const Tensor* t = call.in[std::size_t(i)]) {
        in_view[std::size_t(i)] = buffer(i);
        widen(at(*t), in_view[std::size_t(i)].data<float>(), len, dt);
        wide.in[std::size_t(i)] = &in_view[std::size_t(i)];
      }
    for (int i = 0; i < kMaxOpOutputs; ++i)
      if (const Tensor* t = call.out[std::size_t(i)]) {
        out_view[std::size_t(i)] = buffer(kMaxOpInputs + i);
        if (reads_outputs) widen(at(*t), out_view[std::size_t(i)].data<float>(), len, dt);
        wide.out[std::size_t(i)] = &out_view[std::size_t(i)];
      }
    run_cpu_op(wide, *inline_pools[std::size_t(worker)]);
    for (int i = 0; i < kMaxOpOutputs; ++i)
      if (const Tensor* t = call.out[std::size_t(i)])
        narrow(out_view[std::size_t(i)].data<float>(), at(*t), len, dt);
  });
}

}  // namespace

void run_widened(const OpCall& call, ThreadPool& pool,
                 const std::function<void(const OpCall&)>& run_f32) {
  if (flat_applies(call)) return run_flat(call, pool);
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
    if (out_f32[std::size_t(i)].defined())
      convert_tensor(out_f32[std::size_t(i)], *call.out[std::size_t(i)], pool);
}

}  // namespace tessera::compute::cpu
