// The CPU kernels of every non-convolution op (layer norm, activations, batch norm, pooling,
// linear, losses, optimizers, ...), dispatched from CpuBackend::execute.
#pragma once

#include "tessera/compute/ops.hpp"
#include "thread_pool.hpp"

namespace tessera::compute::cpu {

/// Runs `call` (any OpKind except the three convolution kinds) on `pool`. Throws Unsupported for
/// a dtype the kernel lacks and InvalidArgument for meta tensors (they hold no data).
void run_cpu_op(const OpCall& call, ThreadPool& pool);

}  // namespace tessera::compute::cpu
