// A device stream on the emulated device (tests only): work enqueued on it runs later, in order,
// when the stream is run, as a GPU runs a stream's work some time after the host enqueued it. A
// communication plugin under test (tests/comm/plugins/stream_plugin.cpp) moves device buffers on
// one; EmulatedDeviceMemory::stream_waits_for_issued puts a wait for the memory's queued writes on
// it, the way the cuda backend has a CUDA stream wait for an event. Header-only: the test plugin,
// a shared library of its own, includes it too.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <utility>

namespace tessera::test {

class EmulatedStream {
 public:
  /// Queues `work` behind what is already queued.
  void enqueue(std::function<void()> work) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  /// Runs the queued work in order until none is left (the device catching up).
  void run() {
    for (;;) {
      std::function<void()> work;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (queue_.empty()) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work();
    }
  }
  std::size_t queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }

 private:
  mutable std::mutex mu_;
  std::deque<std::function<void()>> queue_;
};

}  // namespace tessera::test
