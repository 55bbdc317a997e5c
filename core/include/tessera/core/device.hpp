// Device-memory seam (placeholder copy of the coordinator's spec; main's version replaces it on merge).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::core {

class Tensor;

enum class MemorySpace : std::uint8_t { Host, Cuda };

/// Memory a compute backend provides for tensors off the host, and the value operations core needs on it.
/// Core never dereferences device memory; it calls these.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual MemorySpace space() const noexcept = 0;
  virtual std::string describe() const = 0;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
  virtual std::size_t reserved_bytes() const = 0;
  virtual std::size_t peak_reserved_bytes() const = 0;
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  virtual void add(const Tensor& dst, const Tensor& src) = 0;
  virtual void fill(const Tensor& dst, double value) = 0;
  virtual void synchronize() = 0;
};

}  // namespace tessera::core
