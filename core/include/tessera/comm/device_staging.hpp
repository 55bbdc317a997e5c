// Device buffers over a host-memory backend: a comm::Backend decorator that copies every
// non-host buffer into host memory, runs the operation on the wrapped backend, and copies the
// results back when the operation completes. Host buffers pass through untouched. How the bytes
// move is a StagingCopier's business: core's own goes through the DeviceMemory a buffer names
// (BufferView::device, which core's tensors fill in) — how the local backend runs P ranks whose
// tensors share one GPU, with no comm backend including CUDA — and the ucx plugin's uses the CUDA
// runtime on a staging stream with pinned host blocks (backends/comm/ucx/src/cuda_staging.cpp).
//
// Semantics, seen from the caller (the same as a device-native backend's):
// - inputs are read when the call is made (StagingCopier::to_host returns when the bytes are on
//   the host, so it is ordered after the kernels that produced them);
// - outputs are written back when wait() or is_completed() first sees the operation finished;
// - a buffer the copier cannot stage is refused before the operation starts (core's copier: a
//   device buffer without its DeviceMemory, with InvalidArgument saying what to pass);
// - host staging blocks are kept per group for reuse (halo exchanges and gradient buckets repeat
//   the same sizes) and freed with the group; capabilities() reports cuda_memory and cuda_staged.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/comm/backend.hpp"

namespace tessera::comm {

/// Which call a staging copy belongs to, for messages: the wrapped backend's name ("ucx") and
/// the call ("rank 0: all_reduce").
struct StagingSite {
  std::string_view backend;
  std::string_view what;
};

/// A device buffer whose result comes back from its host copy.
struct StagedOutput {
  BufferView device;
  void* host = nullptr;
};

/// How one group's device buffers reach host memory and back. Used by the group's thread only;
/// lives as long as the group and its pending operations.
class StagingCopier {
 public:
  virtual ~StagingCopier() = default;
  /// A copier of the same kind, with resources of its own, for a sub-group (split()).
  virtual std::unique_ptr<StagingCopier> for_sub_group() const = 0;
  /// Throws unless `v` (not host memory, count > 0) can be staged: InvalidArgument saying what to
  /// pass, BackendError where the device cannot be used.
  virtual void check(const BufferView& v, const StagingSite& site) = 0;
  /// A new host block of at least `bytes`; its size (perhaps rounded up) goes to `got`.
  virtual void* allocate_host(std::size_t bytes, std::size_t& got, const StagingSite& site) = 0;
  /// Frees a block from allocate_host.
  virtual void free_host(void* p) noexcept = 0;
  /// Copies `v`'s bytes into `host`; returns when they are there.
  virtual void to_host(void* host, const BufferView& v, const StagingSite& site) = 0;
  /// Copies each output's host bytes back into its device buffer; returns when they are there.
  virtual void to_device(const std::vector<StagedOutput>& outputs, const StagingSite& site) = 0;
};

/// Wraps `host_only` so that it also accepts device buffers that carry their DeviceMemory;
/// split() wraps the sub-groups too.
std::unique_ptr<Backend> stage_device_buffers(std::unique_ptr<Backend> host_only);

/// Wraps `host_only` so that it also accepts the device buffers `copier` stages; split() wraps
/// the sub-groups too, each with copier->for_sub_group().
std::unique_ptr<Backend> stage_device_buffers(std::unique_ptr<Backend> host_only,
                                              std::unique_ptr<StagingCopier> copier);

/// The copier of a group made by stage_device_buffers, or null for another backend.
StagingCopier* staging_copier(Backend& b) noexcept;

/// `host_only`'s capabilities as the staging decorator reports them.
inline Capabilities staged_capabilities(Capabilities host_only) {
  host_only.cuda_memory = true;
  host_only.cuda_staged = true;
  return host_only;
}

}  // namespace tessera::comm
