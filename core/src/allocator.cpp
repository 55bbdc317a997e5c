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
    if (!meta_ && kCache && bytes >= kMinCachedBlock) {
      auto it = cache_.find(round_up(bytes));
      if (it != cache_.end()) {
        void* p = it->second;
        cached_bytes_ -= it->first;
        cache_.erase(it);
        return p;
      }
    }
  }
  if (meta_) return nullptr;
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
  return stats_;
}

void Allocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.current;
  stats_.peak_total = stats_.current_total;
  stats_.num_allocations = 0;
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
