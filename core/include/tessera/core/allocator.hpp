// Per-rank allocator that books every tensor byte by category, with current and peak figures.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "tessera/core/device.hpp"

namespace tessera::core {

/// What a block of memory holds. The simulator's memory model predicts the same categories.
enum class MemCategory : std::uint8_t {
  Parameter,
  Gradient,
  OptimizerState,
  Activation,
  HaloBuffer,
  Workspace,
};
inline constexpr int kNumMemCategories = 6;

/// Lowercase name used in reports, traces and metrics files ("parameter", "halo_buffer", ...).
std::string_view mem_category_name(MemCategory c) noexcept;

/// Current and peak bytes per category, plus the peak of the total (not the sum of peaks).
struct MemStats {
  std::array<std::size_t, kNumMemCategories> current{};
  std::array<std::size_t, kNumMemCategories> peak{};
  std::size_t current_total = 0;
  std::size_t peak_total = 0;
  std::size_t num_allocations = 0;  ///< allocations made since construction or reset_peaks()
  /// What the memory really holds for these tensors: on a device, the pool's reserve (cache
  /// included); on the host, the booked bytes plus the block cache. peak_reserved: its high mark.
  std::size_t reserved = 0;
  std::size_t peak_reserved = 0;

  std::size_t current_of(MemCategory c) const { return current[static_cast<int>(c)]; }
  std::size_t peak_of(MemCategory c) const { return peak[static_cast<int>(c)]; }
};

/// Allocator for one rank's tensors in one memory space. Thread-safe. Host blocks are 64-byte
/// aligned; device blocks come from the DeviceMemory the allocator was built on (a compute
/// backend's), which also serves Tensor's copies and fills there.
/// Every allocation is booked under a category; `stats()` reports current and peak bytes.
/// An optional capacity makes an allocation that would exceed it throw OutOfMemory, which lets a
/// run check "does this fit on a device of N bytes" on the host.
///
/// A *meta* allocator books exactly the same bytes but hands out no memory (allocate returns
/// nullptr): running a model on meta tensors with a recording backend yields the runtime's own
/// allocation sequence and peaks for any input size, which is how the simulator's memory model
/// stays equal to the runtime's.
class Allocator {
 public:
  explicit Allocator(std::string name = "host", bool meta = false);
  /// Books tensors in `device`'s memory (a compute backend's device_memory()).
  Allocator(std::string name, std::shared_ptr<DeviceMemory> device);
  bool is_meta() const noexcept { return meta_; }
  /// Host unless built on a DeviceMemory.
  MemorySpace space() const noexcept { return device_ ? device_->space() : MemorySpace::Host; }
  /// The device memory behind this allocator; null for host (and meta) allocators.
  DeviceMemory* device() const noexcept { return device_.get(); }
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  /// Returns `bytes` bytes (64-byte aligned; a zero-byte request returns a unique non-null block).
  /// Throws OutOfMemory past the capacity or when the system has no memory left.
  void* allocate(std::size_t bytes, MemCategory category);
  /// Returns a block obtained from allocate() with the same size and category. Never throws.
  void deallocate(void* p, std::size_t bytes, MemCategory category) noexcept;

  MemStats stats() const;
  /// Restarts peak tracking from the current figures (e.g. after model setup).
  void reset_peaks();
  /// 0 = unlimited.
  void set_capacity(std::size_t bytes);
  std::size_t capacity() const;
  const std::string& name() const noexcept { return name_; }
  /// Bytes held in the block cache: freed blocks of 64 KiB and more are kept (up to 1 GiB) and
  /// handed out again for a request of the same rounded size, so a training loop that allocates
  /// the same shapes every step stops paying for fresh pages (page faults doubled the time of a
  /// sharded conv step without it). Cached bytes are not booked in any category. Sanitizer builds
  /// cache nothing, so use-after-free stays detectable.
  std::size_t cached_bytes() const;
  /// Whether this build caches freed blocks (false under AddressSanitizer).
  static bool caches_blocks() noexcept;
  ~Allocator();

 private:
  std::string name_;
  bool meta_ = false;
  std::shared_ptr<DeviceMemory> device_;
  mutable std::mutex mu_;
  MemStats stats_;
  std::size_t capacity_ = 0;
  std::multimap<std::size_t, void*> cache_;  // rounded size → free block
  std::size_t cached_bytes_ = 0;
  std::size_t peak_reserved_ = 0;  // host: high mark of booked + cached bytes
  void note_reserved() {  // under mu_
    if (stats_.current_total + cached_bytes_ > peak_reserved_) peak_reserved_ = stats_.current_total + cached_bytes_;
  }
};

using AllocatorPtr = std::shared_ptr<Allocator>;

}  // namespace tessera::core
