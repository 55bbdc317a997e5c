// The one list of backends built into this tessera: fills the comm and compute registries.
#pragma once

#include <vector>

#include "tessera/comm/plugin_loader.hpp"
#include "tessera/comm/registry.hpp"
#include "tessera/compute/backend.hpp"

namespace tessera {

/// Adds every communication backend this build contains ("local", ...) to `registry`.
void register_builtin_backends(comm::Registry& registry);
/// Loads the comm plugins found on comm::plugin_search_path() into `registry` (after the
/// built-ins) and returns what happened to each, including known plugins that were not found.
std::vector<comm::PluginStatus> register_plugin_backends(comm::Registry& registry);
/// Adds every compute backend this build contains ("cpu", ...) to `registry`.
void register_builtin_backends(compute::Registry& registry);

}  // namespace tessera
