// A test instrument for core's device paths on a machine without a GPU: device memory that core
// must treat as device memory (MemorySpace::Cuda: Tensor::data<T>() refuses it, copies, fills and
// communication must go through DeviceMemory), held in host blocks so that a host backend can
// compute on it. It checks the *routing* — that core never reads or writes a device tensor
// through the host API, that every copy between host and device is explicit, and that the local
// backend stages device buffers — not CUDA itself: the cuda backend's own tests (label gpu) and
// tests/gpu/run_gpu_checks.sh check that on a GPU. Never registered as a backend; tests only.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "tessera/compute/backend.hpp"
#include "tessera/core/device.hpp"

namespace tessera::test {

class EmulatedDeviceMemory final : public core::DeviceMemory {
 public:
  core::MemorySpace space() const noexcept override { return core::MemorySpace::Cuda; }
  std::string describe() const override { return "emulated device (host blocks, tests only)"; }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) noexcept override;
  std::size_t reserved_bytes() const override;
  std::size_t peak_reserved_bytes() const override;
  void copy(const core::Tensor& dst, const core::Tensor& src) override;
  void copy_bytes(void* dst, const void* src, std::size_t bytes) override;
  void add(const core::Tensor& dst, const core::Tensor& src) override;
  void fill(const core::Tensor& dst, double value) override;
  void synchronize() override {}

  /// Copies that crossed between host and device (counted by copy and copy_bytes).
  std::atomic<long> host_to_device{0}, device_to_host{0}, device_to_device{0};

  /// Whether [p, p + bytes) lies inside a live block of any EmulatedDeviceMemory.
  static bool is_device(const void* p, std::size_t bytes);

 private:
  mutable std::mutex mu_;
  std::size_t reserved_ = 0, peak_ = 0;
};

/// Runs a host compute backend on tensors in an EmulatedDeviceMemory: every device tensor of a
/// call is handed to the wrapped backend as a host alias of the same block (the call's tensors
/// must all be in device memory: a host tensor given to a device backend is a routing bug and
/// fails the call).
class EmulatedDeviceCompute final : public compute::Backend {
 public:
  EmulatedDeviceCompute(std::unique_ptr<compute::Backend> host, std::shared_ptr<EmulatedDeviceMemory> memory)
      : host_(std::move(host)), memory_(std::move(memory)) {}
  std::string_view name() const noexcept override { return "emulated-device"; }
  int num_threads() const noexcept override { return host_->num_threads(); }
  void set_num_threads(int n) override { host_->set_num_threads(n); }
  void execute(const compute::OpCall& call) override;
  std::shared_ptr<core::DeviceMemory> device_memory() override { return memory_; }

 private:
  std::unique_ptr<compute::Backend> host_;
  std::shared_ptr<EmulatedDeviceMemory> memory_;
};

/// A host view (no copy, unbooked) of a tensor in an EmulatedDeviceMemory.
core::Tensor host_alias(const core::Tensor& device_tensor);

}  // namespace tessera::test
