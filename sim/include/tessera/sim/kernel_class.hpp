// Kernel classes: the name under which a compute call's speed is calibrated and simulated. One op
// (conv2d_forward) runs through kernels whose speeds differ by an order of magnitude (a grouped
// 3×3 convolution against a 1×1 one), so the op name alone is too coarse a key.
#pragma once

#include <string>

#include "tessera/compute/ops.hpp"

namespace tessera::sim {

/// The op name, plus a variant where one op's kernels differ widely in speed:
///  - convolutions: "/depthwise" (one input channel per group, more than one group),
///    "/pointwise" (1×1, stride 1, no padding, one group), "/grouped" (other grouped
///    convolutions), "/patchify" (non-overlapping windows: kernel = stride > 1, no padding, as
///    in ConvNeXt's stem and downsampling), "/dense" (everything else: k×k, strided, RegNet's
///    stem);
///  - activations: "/relu", "/gelu", "/sigmoid".
///  - a call in 16-bit storage (bf16/f16, mixed precision) ends in "@bf16" or "@f16": its kernels
///    run at other rates (tensor cores; on the CPU, f32 compute plus conversions), so an f32
///    calibration does not time them.
/// E.g. "conv2d_backward_weight/depthwise", "activation_forward/gelu", "layernorm_forward",
/// "conv2d_forward/dense@bf16". Derived from the call's geometry and dtype alone, so a replay on
/// meta tensors and a timed call on real ones get the same class.
std::string kernel_class(const compute::OpCall& call);

/// The op name part of a kernel class ("conv2d_forward/dense@bf16" → "conv2d_forward").
std::string kernel_class_op(const std::string& kernel_class);

/// True for a name kernel_class can return, or an op name alone (compute::op_name).
bool is_kernel_class(const std::string& name);

}  // namespace tessera::sim
