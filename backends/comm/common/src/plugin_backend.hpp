// PluginBackend: a comm::Backend over a loaded plugin's C table (statuses become exceptions).
#pragma once

#include <memory>

#include "tessera/comm/backend.hpp"
#include "tessera/comm/plugin_v1.h"

namespace tessera::comm {

/// The plugin's optional symbols (plugin_v1.h); each may be null.
struct PluginExtras {
  /// When a request's data moved; null: Work::moved says nothing.
  tessera_comm_plugin_v1_moved_fn moved = nullptr;
  /// The stream a ctx touches CUDA buffers on; null: a call waits on the host for its buffers'
  /// producers (DeviceMemory::synchronize) instead of ordering that stream after them.
  tessera_comm_plugin_v1_stream_fn stream = nullptr;
};

/// Creates the world group of a loaded plugin. `lib` keeps the library loaded while any backend
/// of it lives. `caps`: what the loader read from the table and the optional symbols. The
/// options' rendezvous must offer a store().
///
/// Device buffers: before each call with CUDA buffers that
/// carry their DeviceMemory, the plugin's stream (extras.stream) is made to wait for the work that
/// memory has issued so far (DeviceMemory::stream_waits_for_issued: an event, no host wait); where
/// the plugin has no stream or the memory cannot order one, the memory is synchronised on the host
/// first. Completion needs nothing more: a request is done only when its outputs are in place.
std::unique_ptr<Backend> make_plugin_backend(std::shared_ptr<void> lib,
                                             const tessera_comm_plugin_v1_t* table,
                                             PluginExtras extras, Capabilities caps,
                                             const BackendOptions& options);

}  // namespace tessera::comm
