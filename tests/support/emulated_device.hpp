// A test instrument for core's device paths on a machine without a GPU: device memory that core
// must treat as device memory (MemorySpace::Cuda: Tensor::data<T>() refuses it, copies, fills and
// communication must go through DeviceMemory), held in host blocks so that a host backend can
// compute on it. It checks the *routing* — that core never reads or writes a device tensor
// through the host API, that every copy between host and device is explicit, and that the local
// backend stages device buffers — not CUDA itself: the cuda backend's own tests (label gpu) and
// the GPU check bundle (tests/gpu/README.md) checks that on a GPU. Never registered as a backend; tests only.
// In deferred mode it also checks *ordering*: writes wait in a queue, as on a device stream, so a
// reader that is not ordered after them (a communication plugin's stream, tests/comm/
// stream_order_test.cpp) sees the bytes from before.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "support/emulated_stream.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/core/device.hpp"

namespace tessera::test {

class EmulatedDeviceMemory final : public core::DeviceMemory {
 public:
  ~EmulatedDeviceMemory() override;
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
  /// Runs the queued operations (deferred mode); counted in `synchronizations`.
  void synchronize() override;
  /// Deferred mode: `stream` (an EmulatedStream) gets a wait that runs this memory's operations
  /// queued so far when the stream reaches it; counted in `stream_orders`. False (the caller must
  /// synchronize) for a null stream or when orders_streams is off.
  bool stream_waits_for_issued(void* stream) override;

  /// Copies that crossed between host and device (counted by copy and copy_bytes).
  std::atomic<long> host_to_device{0}, device_to_host{0}, device_to_device{0};

  /// Deferred mode (off by default): the operations that write device memory — copy and
  /// copy_bytes into it (a host source is read at the call, as cudaMemcpyAsync stages pageable
  /// memory), add, fill — and frees are queued, as on the cuda backend's compute stream, and run
  /// in order later: at synchronize(), before a copy into host memory (which returns when the data
  /// is there, as the cuda backend's does), before a kernel of EmulatedDeviceCompute (kernels run
  /// at once, in the queue's order), and when a stream ordered by stream_waits_for_issued reaches
  /// its wait. Off: every operation runs when called.
  void set_deferred(bool on);
  /// Runs every queued operation (what the device does by itself, eventually).
  void run_queued();
  /// Operations queued and not yet run.
  std::size_t queued() const;
  /// Whether stream_waits_for_issued orders a stream (true) or answers false, like a memory that
  /// cannot order another library's stream.
  std::atomic<bool> orders_streams{true};
  /// Calls of synchronize() (host waits) and of stream_waits_for_issued that ordered a stream.
  std::atomic<long> synchronizations{0}, stream_orders{0};

  /// Whether [p, p + bytes) lies inside a live block of any EmulatedDeviceMemory.
  static bool is_device(const void* p, std::size_t bytes);

 private:
  /// Whether deferred mode is on.
  bool queueing() const;
  /// Runs `op` now, or queues it in deferred mode.
  void issue(std::function<void()> op);
  /// Runs the queued operations numbered up to `last`, in order.
  void run_until(std::uint64_t last);

  mutable std::mutex mu_;
  std::size_t reserved_ = 0, peak_ = 0;

  mutable std::mutex queue_mu_;
  bool deferred_ = false;
  std::uint64_t issued_ = 0;  ///< operations queued so far (the number of the last one)
  std::deque<std::pair<std::uint64_t, std::function<void()>>> queue_;
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
  compute::Capabilities capabilities() const noexcept override { return host_->capabilities(); }
  void execute(const compute::OpCall& call) override;
  std::shared_ptr<core::DeviceMemory> device_memory() override { return memory_; }

 private:
  std::unique_ptr<compute::Backend> host_;
  std::shared_ptr<EmulatedDeviceMemory> memory_;
};

/// A host view (no copy, unbooked) of a tensor in an EmulatedDeviceMemory.
core::Tensor host_alias(const core::Tensor& device_tensor);

}  // namespace tessera::test
