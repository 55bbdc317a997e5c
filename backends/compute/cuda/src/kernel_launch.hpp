// The launcher of the kernel bodies (backends/compute/cuda/kernels/): every op without a library
// path runs as a grid-stride __global__ over its body, on the compute stream.
#pragma once

#include "tessera/compute/ops.hpp"
#include "workspace.hpp"

namespace tessera::compute::cuda {

/// Runs `call` (any op but the convolutions and linear) on ws's compute stream; scratch of the
/// body (reductions) comes from `ws`. Unsupported for an op or dtype without a kernel.
void run_kernel(const Workspace& ws, const OpCall& call);

}  // namespace tessera::compute::cuda
