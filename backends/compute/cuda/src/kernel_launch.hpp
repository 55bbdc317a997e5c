// The launcher of the kernel bodies (backends/compute/cuda/kernels/): every op without a library
// path runs as a grid-stride __global__ over its body, on the compute stream.
#pragma once

#include "cuda_memory.hpp"
#include "tessera/compute/ops.hpp"
#include "workspace.hpp"

namespace tessera::compute::cuda {

/// Runs `call` (any op but the convolutions and linear) on ws's compute stream; scratch of the
/// body (reductions) comes from `ws`. Unsupported for an op or dtype without a kernel.
void run_kernel(const Workspace& ws, const OpCall& call);

// The tensor helpers of the kernel bodies (kernels/dispatch.hpp) on `mem`'s compute stream, for
// the device memory's own copies and for the library paths' staging. Any strides, stride 0 too
// (a broadcast source); device pointers only (the tensors' raw_data()).

/// dst = src: same shape and dtype, any dtype (moved bitwise).
void tensor_copy(CudaMemory& mem, const core::Tensor& dst, const core::Tensor& src);
/// dst += src: one float dtype, or a bf16/f16 src added into an f32 dst (rounded once).
void tensor_add(CudaMemory& mem, const core::Tensor& dst, const core::Tensor& src);
/// dst = src converted to dst's dtype (any two float dtypes; bf16/f16 rounding by core/half.hpp).
void tensor_convert(CudaMemory& mem, const core::Tensor& dst, const core::Tensor& src);
/// dst = value: any value for float dtypes (rounded for bf16/f16), 0 for any dtype.
void tensor_fill(CudaMemory& mem, const core::Tensor& dst, double value);

}  // namespace tessera::compute::cuda
