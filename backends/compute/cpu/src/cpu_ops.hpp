// The CPU kernels of every non-convolution op (layer norm, activations, batch norm, pooling,
// linear, losses, optimizers, ...), dispatched from CpuBackend::execute, and the widening of
// bf16/f16 calls to f32.
#pragma once

#include <functional>

#include "tessera/compute/cpu.hpp"
#include "tessera/compute/ops.hpp"
#include "thread_pool.hpp"

namespace tessera::compute::cpu {

/// Runs `call` (any OpKind except the three convolution kinds) on `pool`. Throws Unsupported for
/// a dtype the kernel lacks and InvalidArgument for meta tensors (they hold no data).
void run_cpu_op(const OpCall& call, ThreadPool& pool);

/// True when the call's float dtype (float_lead) is bf16 or f16 and the op computes (every op but
/// copy, which converts between any two float dtypes itself).
bool is_half_call(const OpCall& call);

/// Runs a bf16/f16 call in f32 (half_calls.cpp): widens every 16-bit tensor into an f32 workspace
/// tensor booked with that tensor's allocator (outputs too, from their current values when the
/// call accumulates or the op updates its outputs), calls run_f32 on the widened call, and narrows
/// each 16-bit output back into the caller's tensor (any strides), rounding once.
void run_widened(const OpCall& call, ThreadPool& pool, const std::function<void(const OpCall&)>& run_f32);

/// Runs a bf16/f16 depthwise or pointwise (1×1) convolution call with f32 weights directly,
/// widening 16-bit rows or blocks in per-thread scratch (conv_half.cpp); false (nothing done) when
/// the call is not one (another geometry, a forced algorithm that is not the one that applies,
/// 16-bit tensors without unit W stride or, for pointwise, contiguous planes, 16-bit weights or
/// weight gradients), and run_widened takes it. bf16 pointwise calls go through oneDNN where
/// onednn_runs(BF16) (conv_onednn.cpp), with `onednn`'s primitives.
bool run_half_conv(const OpCall& call, ThreadPool& pool, OnednnCache& onednn, ConvAlgo forced);

/// Runs a bf16/f16 layer norm call (forward or backward) on its 16-bit storage directly, widening
/// rows as each block is staged in per-worker f32 scratch and rounding each output row once
/// (ops_layernorm_half.cpp): the bits of run_widened's call. False (nothing done) when the call is
/// not one, its 16-bit tensors' pixels are not one unit-stride run, or a Master slot is not f32;
/// run_widened takes it.
bool run_half_norm(const OpCall& call, ThreadPool& pool);

/// Runs a bf16/f16 scale_channels, scale_channels_backward or scale_samples call of more than
/// 2^14 elements with f32 scales on its 16-bit storage, plane by plane in chunks through per-worker
/// f32 buffers (ops_scale_half.cpp): the bits of run_widened's call. False (nothing done) for
/// other calls, smaller ones, 16-bit tensors whose pixels are not one run, or 16-bit scales.
bool run_half_scale(const OpCall& call, ThreadPool& pool);

}  // namespace tessera::compute::cpu
