// The cuda-kernels@host compute backend: the cuda backend's own kernel bodies
// (backends/compute/cuda/kernels) run by a plain host loop, so the conformance suite checks their
// index math and arithmetic on the CPU. Not registered for users; the tests create it directly.
#pragma once

#include <memory>
#include <string_view>

#include "tessera/compute/backend.hpp"

namespace tessera::compute::cuda {

/// Runs every non-library op of the op table (all but the convolutions and linear_forward /
/// linear_backward, which the cuda backend hands to cuDNN / cuBLAS: Unsupported here) in f32 and
/// f64 on host tensors, one pass after another, each pass's items in a loop on the calling thread.
/// Workspace is booked as MemCategory::Workspace with the allocator of the call's first float
/// tensor. Slow by design: it exists to check the GPU kernels' arithmetic, not to be used.
class HostLoopBackend final : public compute::Backend {
 public:
  std::string_view name() const noexcept override { return "cuda-kernels@host"; }
  /// Always 1: the loop runs on the calling thread.
  int num_threads() const noexcept override { return 1; }
  /// Accepts any n ≥ 1 and keeps running on one thread.
  void set_num_threads(int n) override;
  void execute(const OpCall& call) override;
};

/// A new HostLoopBackend (the options' thread count is ignored).
std::unique_ptr<compute::Backend> create_host_loop(const BackendOptions& options);

}  // namespace tessera::compute::cuda
