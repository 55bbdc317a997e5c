// Internal to calibration: the kernel suite as a list of ready-to-run calls on tensors allocated
// up front (one set per rank), at the sizes of small and medium ConvNeXt and RegNet layers.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/compute/backend.hpp"
#include "tessera/core/allocator.hpp"

namespace tessera::sim::detail_calibrate {

/// Issues exactly one kernel through the backend it is given, on tensors it owns.
using Call = std::function<void(compute::Backend&)>;

/// One timed case: `make` allocates a fresh set of tensors and returns the call on them (the
/// timing cycles through several sets, so that inputs come from memory or the shared cache as
/// in a training step, not from the core's own cache).
struct TimedCall {
  std::string label;  ///< geometry, e.g. "7x7/s1 g16 16->16 on 2x16x16x64"
  std::function<Call()> make;
};

/// The suite: convolutions of every class (forward, backward data, backward weight), the
/// normalisations, activations, elementwise and channel ops, the loss, linear layers and the
/// optimizer updates, each at several sizes (fewer when `quick`). Tensors hold deterministic
/// pseudo-random values in [-1, 1] (positive where a kernel needs it: rstd, counts), in host
/// memory, or in `device`'s memory when given (an allocator over a compute backend's
/// device_memory()). With `dtype` bf16 or f16, the calls of a mixed-precision step in that dtype:
/// activations in 16 bits, parameters and statistics in f32, and no optimizer or top-k calls
/// (those stay f32).
std::vector<TimedCall> kernel_suite(bool quick, const core::AllocatorPtr& device = nullptr,
                                    core::DType dtype = core::DType::F32);

}  // namespace tessera::sim::detail_calibrate
