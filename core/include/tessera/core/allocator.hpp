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

  std::size_t current_of(MemCategory c) const { return current[static_cast<int>(c)]; }
  std::size_t peak_of(MemCategory c) const { return peak[static_cast<int>(c)]; }
};

/// Host allocator for one rank. Thread-safe. Blocks are 64-byte aligned.
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
  bool is_meta() const noexcept { return meta_; }
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
  mutable std::mutex mu_;
  MemStats stats_;
  std::size_t capacity_ = 0;
  std::multimap<std::size_t, void*> cache_;  // rounded size → free block
  std::size_t cached_bytes_ = 0;
};

using AllocatorPtr = std::shared_ptr<Allocator>;

}  // namespace tessera::core
