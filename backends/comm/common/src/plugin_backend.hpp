// PluginBackend: a comm::Backend over a loaded plugin's C table (statuses become exceptions).
#pragma once

#include <memory>

#include "tessera/comm/backend.hpp"
#include "tessera/comm/plugin_v1.h"

namespace tessera::comm {

/// Creates the world group of a loaded plugin. `lib` keeps the library loaded while any backend
/// of it lives. `plans` is the plugin's optional prepared-batch table, or nullptr (prepare_p2p
/// then runs batch_p2p at every start). `moved`: the plugin's optional transfer-time query, or
/// nullptr (Work::moved then says nothing). `caps`: what the loader read from the table and the
/// optional symbols. The options' rendezvous must offer a store().
std::unique_ptr<Backend> make_plugin_backend(std::shared_ptr<void> lib, const tessera_comm_plugin_v1_t* table,
                                             const tessera_comm_plugin_v1_plans_t* plans,
                                             tessera_comm_plugin_v1_moved_fn moved, Capabilities caps,
                                             const BackendOptions& options);

}  // namespace tessera::comm
