// The device-memory seam: memory a compute backend provides for tensors off the host (a CUDA
// device), and the few value operations core needs on it. Core never dereferences device memory
// and includes no CUDA: it calls these, and a backend (backends/compute/cuda) implements them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::core {

class Tensor;

/// Where a tensor's bytes live. Host memory is readable by host code; Cuda memory only by the
/// backend that owns it (kernels, copies).
enum class MemorySpace : std::uint8_t { Host, Cuda };

/// "host", "cuda".
std::string_view memory_space_name(MemorySpace s) noexcept;

/// Device memory of one rank, provided by its compute backend (compute::Backend::device_memory).
/// An Allocator built on it books tensors by category exactly as on the host and takes its blocks
/// from here; Tensor's copy_from / add_from / fill route here when a tensor lives on the device.
/// Operations are ordered on the backend's compute stream, so they are ordered with its kernels.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual MemorySpace space() const noexcept = 0;
  /// "cuda:0 (NVIDIA H200, 139 GiB)".
  virtual std::string describe() const = 0;

  /// A device block of `bytes` (stream-ordered; may come from a cache). Throws OutOfMemory naming
  /// the request and the device's free and total memory.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
  /// What the device really holds for this memory (pool reserve and cache included): at least
  /// the bytes tensors use.
  virtual std::size_t reserved_bytes() const = 0;
  virtual std::size_t peak_reserved_bytes() const = 0;

  /// dst = src elementwise: same shape and dtype, any strides; each side in this memory, in
  /// another DeviceMemory of the same space in this process (ranks sharing one GPU), or on the
  /// host. A copy into host memory returns when the data is there.
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  /// Copies `bytes` contiguous bytes; dst and src are each a host address or an address in a
  /// DeviceMemory of this space in this process (communication backends stage buffers with it).
  /// A copy into host memory returns when the data is there.
  virtual void copy_bytes(void* dst, const void* src, std::size_t bytes) = 0;
  /// dst += src: dst in this memory, src in this or another DeviceMemory of the same space;
  /// float dtypes.
  virtual void add(const Tensor& dst, const Tensor& src) = 0;
  /// Every element of dst (in this memory) = value; any dtype for 0, float dtypes otherwise.
  virtual void fill(const Tensor& dst, double value) = 0;
  /// Waits until every operation issued so far has finished.
  virtual void synchronize() = 0;
  /// Makes `stream` wait, on the device, for every operation issued on this memory so far (copies,
  /// fills, adds and the backend's kernels), without a host wait: work enqueued on `stream` after
  /// the call runs after them. `stream` is a native stream of this memory's kind that another
  /// library runs on (the cuda backend: a cudaStream_t passed as void*, of any device), such as a
  /// communication plugin's (plugin_v1.h, tessera_comm_plugin_v1_stream). Returns false where this
  /// memory cannot order another stream (the default, and for a null `stream`): the caller then
  /// calls synchronize() before `stream` touches the memory. Throws BackendError when the device
  /// fails.
  virtual bool stream_waits_for_issued(void* stream) {
    (void)stream;
    return false;
  }

  /// Page-locks `bytes` of host memory at `p` for fast, asynchronous copies (cudaHostRegister);
  /// false where this memory cannot (the default: copies stay as they are). A Loader pins its
  /// host batch slots this way and unpins them before they are freed.
  virtual bool pin_host(void* p, std::size_t bytes) {
    (void)p, (void)bytes;
    return false;
  }
  virtual void unpin_host(void* p) noexcept { (void)p; }
  /// Copies `bytes` from host memory `src` to `dst` in this memory, ordered after every operation
  /// issued on the compute stream before the call (so `dst` may still be read by queued kernels),
  /// and returns when the data is there. May be called from another thread than the rank's (a
  /// loader thread) while the rank issues work: the cuda backend copies on a stream of its own, so
  /// the copy overlaps the rank's kernels. The default copies with copy_bytes and synchronises.
  virtual void upload(void* dst, const void* src, std::size_t bytes) {
    copy_bytes(dst, src, bytes);
    synchronize();
  }
};

}  // namespace tessera::core
