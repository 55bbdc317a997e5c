// Allocator: aligned host allocation with per-category byte accounting.
#include "tessera/core/allocator.hpp"

#include <cstdlib>
#include <new>

#include "tessera/core/error.hpp"

namespace tessera::core {

namespace {
constexpr std::size_t kAlignment = 64;
constexpr std::size_t kMinCachedBlock = std::size_t(64) << 10;
constexpr std::size_t kMaxCachedBytes = std::size_t(1) << 30;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCache = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kCache = false;
#else
constexpr bool kCache = true;
#endif
#else
constexpr bool kCache = true;
#endif
std::size_t round_up(std::size_t bytes) {
  const std::size_t r = ((bytes + kAlignment - 1) / kAlignment) * kAlignment;
  return r == 0 ? kAlignment : r;
}
}  // namespace

bool Allocator::caches_blocks() noexcept { return kCache; }

Allocator::~Allocator() {
  for (auto& [size, p] : cache_) std::free(p);
}

std::size_t Allocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_bytes_;
}

std::string_view mem_category_name(MemCategory c) noexcept {
  switch (c) {
    case MemCategory::Parameter: return "parameter";
    case MemCategory::Gradient: return "gradient";
    case MemCategory::OptimizerState: return "optimizer_state";
    case MemCategory::Activation: return "activation";
    case MemCategory::HaloBuffer: return "halo_buffer";
    case MemCategory::Workspace: return "workspace";
  }
  return "?";
}

Allocator::Allocator(std::string name, bool meta) : name_(std::move(name)), meta_(meta) {}

Allocator::Allocator(std::string name, std::shared_ptr<DeviceMemory> device)
    : name_(std::move(name)), device_(std::move(device)) {
  TESSERA_CHECK(device_ != nullptr, "allocator '", name_, "': no device memory given");
}

std::string_view memory_space_name(MemorySpace s) noexcept {
  switch (s) {
    case MemorySpace::Host: return "host";
    case MemorySpace::Cuda: return "cuda";
  }
  return "?";
}

void* Allocator::allocate(std::size_t bytes, MemCategory category) {
  const int c = static_cast<int>(category);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (capacity_ != 0 && stats_.current_total + bytes > capacity_) {
      throw OutOfMemory(detail::cat(
          "allocator '", name_, "': allocating ", bytes, " bytes of ", mem_category_name(category),
          " would exceed the capacity of ", capacity_, " bytes (", stats_.current_total,
          " in use); use more shards, activation checkpointing or a smaller batch"));
    }
    stats_.current[c] += bytes;
    stats_.current_total += bytes;
    if (stats_.current[c] > stats_.peak[c]) stats_.peak[c] = stats_.current[c];
    if (stats_.current_total > stats_.peak_total) stats_.peak_total = stats_.current_total;
    ++stats_.num_allocations;
    if (!meta_ && !device_ && kCache && bytes >= kMinCachedBlock) {
      auto it = cache_.find(round_up(bytes));
      if (it != cache_.end()) {
        void* p = it->second;
        cached_bytes_ -= it->first;
        cache_.erase(it);
        note_reserved();
        return p;
      }
    }
    note_reserved();
  }
  if (meta_) return nullptr;
  if (device_) {
    try {
      return device_->allocate(bytes);  // the device's own pool caches
    } catch (...) {
      deallocate(nullptr, bytes, category);
      throw;
    }
  }
  const std::size_t rounded = round_up(bytes);
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) {
    deallocate(nullptr, bytes, category);
    throw OutOfMemory(detail::cat("allocator '", name_, "': the system refused ", bytes,
                                  " bytes of ", mem_category_name(category)));
  }
  return p;
}

void Allocator::deallocate(void* p, std::size_t bytes, MemCategory category) noexcept {
  const int c = static_cast<int>(category);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.current[c] -= bytes;
  stats_.current_total -= bytes;
  if (p == nullptr) return;
  if (device_) {
    device_->deallocate(p, bytes);
    return;
  }
  const std::size_t rounded = round_up(bytes);
  if (kCache && bytes >= kMinCachedBlock && cached_bytes_ + rounded <= kMaxCachedBytes) {
    try {
      cache_.emplace(rounded, p);
      cached_bytes_ += rounded;
      return;
    } catch (...) {  // no memory for the map node: free the block instead
    }
  }
  std::free(p);
}

MemStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  MemStats s = stats_;
  if (device_) {
    s.reserved = device_->reserved_bytes();
    s.peak_reserved = device_->peak_reserved_bytes();
  } else {
    s.reserved = s.current_total + cached_bytes_;
    s.peak_reserved = peak_reserved_;
  }
  return s;
}

void Allocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.current;
  stats_.peak_total = stats_.current_total;
  stats_.num_allocations = 0;
  peak_reserved_ = stats_.current_total + cached_bytes_;
}

void Allocator::set_capacity(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  capacity_ = bytes;
}

std::size_t Allocator::capacity() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capacity_;
}

}  // namespace tessera::core
