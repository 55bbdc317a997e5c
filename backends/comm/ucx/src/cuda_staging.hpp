// CUDA buffers over a host-only transport: the ucx plugin's StagingCopier for core's staging
// decorator (tessera/comm/device_staging.hpp), which copies MemorySpace::Cuda buffers into pinned
// host memory, runs the operation on the wrapped (host-memory) backend, and copies the results
// back when the operation completes. Debian's UCX has no CUDA transport; this is how the ucx
// plugin accepts device tensors. Built only where the CUDA toolkit is found (the copier links the
// CUDA runtime); host buffers pass through untouched.
//
// Semantics (the same as a native CUDA backend's, seen from the caller):
// - every copy runs on the group's staging stream (one per group, a blocking stream created at the
//   first CUDA buffer; exported as tessera_comm_plugin_v1_stream): before a call with device
//   tensors the host makes that stream wait for their compute stream's work (an event), and a
//   blocking stream also follows the legacy default stream's work (raw buffers filled by
//   cudaMemcpy);
// - inputs are read when the call is made (cudaMemcpyAsync device → pinned host on the staging
//   stream, then the stream is synchronised), outputs are written when wait() or is_completed()
//   first sees the operation finished (pinned host → device on the staging stream, synchronised
//   before it returns, so the data is in place before the caller issues more compute);
// - a pointer marked Cuda that CUDA does not know as device or managed memory is refused with
//   InvalidArgument; a process with no usable CUDA device gets BackendError saying so;
// - pinned buffers are kept per group for reuse (halo exchanges and gradient buckets repeat the
//   same sizes) and freed with the group; capabilities() reports cuda_memory and cuda_staged.
#pragma once

#include <memory>

#include "tessera/comm/device_staging.hpp"

namespace tessera::comm {

/// Wraps `host_only` (a backend of host memory) so that it also accepts CUDA buffers: core's
/// staging decorator with the CUDA copier; split() wraps the sub-groups too.
std::unique_ptr<Backend> stage_cuda_through_host(std::unique_ptr<Backend> host_only);

/// The staging stream of a group made by stage_cuda_through_host (a cudaStream_t as void*; created
/// on the first call), or null for another backend or where CUDA cannot create one. Never throws.
void* staging_stream(Backend& b) noexcept;

}  // namespace tessera::comm
