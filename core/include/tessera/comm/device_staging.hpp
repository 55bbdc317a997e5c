// Device buffers over a host-memory backend: a comm::Backend decorator that copies every
// MemorySpace::Cuda buffer into host memory through the DeviceMemory the buffer names
// (BufferView::device, which core's tensors fill in), runs the operation on the wrapped backend,
// and copies the results back when the operation completes. This is how the local backend runs P
// ranks whose tensors share one GPU: the copies go through the compute backend's memory, so no
// comm backend includes CUDA. Host buffers pass through untouched.
//
// Semantics, seen from the caller (the same as a device-native backend's):
// - inputs are read when the call is made (DeviceMemory::copy_bytes device → host, which returns
//   when the bytes are on the host, so it is ordered after the kernels that produced them);
// - outputs are written back when wait() or is_completed() first sees the operation finished;
// - a Cuda buffer without its DeviceMemory is refused with InvalidArgument saying what to pass;
// - host staging blocks are kept per group for reuse (halo exchanges and gradient buckets repeat
//   the same sizes); capabilities() reports cuda_memory and cuda_staged.
#pragma once

#include <memory>

#include "tessera/comm/backend.hpp"

namespace tessera::comm {

/// Wraps `host_only` so that it also accepts device buffers that carry their DeviceMemory;
/// split() wraps the sub-groups too.
std::unique_ptr<Backend> stage_device_buffers(std::unique_ptr<Backend> host_only);

}  // namespace tessera::comm
