// The non-convolution CPU kernels, one per op of TESSERA_COMPUTE_KERNEL_OPS, each for T = float and
// double: run_<op name><T>, declared here from that list and defined in an ops_*.cpp file (which
// instantiates it for both types). Core has checked the call (shapes, and dtypes by the op table);
// ops_dispatch.cpp routes each call by the same list, so a new op needs no edit here.
#pragma once

#include "tessera/compute/ops.hpp"
#include "thread_pool.hpp"

namespace tessera::compute::cpu::ops {

#define TESSERA_CPU_KERNEL(kind, name) \
  template <class T>                   \
  void run_##name(const OpCall& c, ThreadPool& pool);
TESSERA_COMPUTE_KERNEL_OPS(TESSERA_CPU_KERNEL)
#undef TESSERA_CPU_KERNEL

}  // namespace tessera::compute::cpu::ops
