// The element-wise reductions of every host-memory comm backend (local, ucx): acc ⊕= in by dtype,
// Avg's division, the bf16/f16 widening to the f32 they are reduced in and the rounding back, and
// a whole reduction of P ranks' inputs in rank order. One set, so that the backends' results are
// the same bits (the conformance suite compares them).
#pragma once

#include <cstddef>
#include <vector>

#include "tessera/comm/backend.hpp"
#include "tessera/core/dtype.hpp"

namespace tessera::comm::reduction {

/// acc[i] = acc[i] ⊕ in[i] for `n` elements of dtype `t` (F32, F64, I32 or I64; bf16/f16 are
/// reduced in f32: widen_half first). Sum and Avg add (integers wrap on overflow; the division of
/// Avg is finish_avg's), Max and Min keep the larger or smaller. acc and in do not overlap.
void reduce_into(void* acc, const void* in, std::size_t n, core::DType t, ReduceOp op);

/// buf[i] = buf[i] / size in the element type (integers truncate toward zero); Avg's last step.
void finish_avg(void* buf, std::size_t n, core::DType t, int size);

/// dst[i] = the f32 value of the 16-bit pattern src[i] of dtype t (BF16 or F16; exact).
void widen_half(const void* src, float* dst, std::size_t n, core::DType t);

/// dst[i] = src[i] rounded to dtype t (BF16 or F16; round to nearest even, core/half.hpp).
void narrow_half(const float* src, void* dst, std::size_t n, core::DType t);

/// Every out[q][i] = in[0][i] ⊕ in[1][i] ⊕ ... ⊕ in[n-1][i], left to right (rank order), for
/// `count` elements of any dtype; Avg divides the result by n. bf16/f16: every input widened to
/// f32 (exactly), combined in f32, divided in f32, then rounded to 16 bits once, so a Sum of n
/// terms is within (n-1)·2^-24·Σ|x_i| + u·|result| of the exact sum (u = unit_roundoff(t)) and
/// ±inf past half_max(t); Max and Min return one of the inputs (NaN aside, which comes out quiet).
/// Works in chunks, so an output may be one of the inputs (in-place all_reduce).
void reduce_in_order(const std::vector<const void*>& in, const std::vector<void*>& out,
                     std::size_t count, core::DType t, ReduceOp op);

}  // namespace tessera::comm::reduction
