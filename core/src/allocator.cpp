// Allocator: aligned host allocation with per-category byte accounting.
#include "tessera/core/allocator.hpp"

#include <cstdlib>
#include <new>

#include "tessera/core/error.hpp"

namespace tessera::core {

namespace {
constexpr std::size_t kAlignment = 64;
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
  }
  if (meta_) return nullptr;
  const std::size_t rounded = ((bytes + kAlignment - 1) / kAlignment) * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (p == nullptr) {
    deallocate(nullptr, bytes, category);
    throw OutOfMemory(detail::cat("allocator '", name_, "': the system refused ", bytes,
                                  " bytes of ", mem_category_name(category)));
  }
  return p;
}

void Allocator::deallocate(void* p, std::size_t bytes, MemCategory category) noexcept {
  std::free(p);
  const int c = static_cast<int>(category);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.current[c] -= bytes;
  stats_.current_total -= bytes;
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
