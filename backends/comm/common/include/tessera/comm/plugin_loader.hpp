// Loading comm backends built as shared libraries (plugin_v1.h): the search path, the versioned
// entry point, and the adapter that makes a loaded plugin a comm::Backend in a Registry.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/comm/registry.hpp"

namespace tessera::comm {

/// What happened to one plugin: loaded, or why not (missing library, wrong version, missing
/// symbol, a duplicate name).
struct PluginStatus {
  std::string name;  ///< backend name ("ucx")
  std::string path;  ///< the library file, or "" when none was found
  bool loaded = false;
  std::string why;   ///< empty when loaded
  /// The plugin's optional probe (plugin_v1.h), empty when it has none: returns "" when the
  /// backend can run in this process, else why not ("no CUDA device visible (...)"). Not called
  /// by the loader (it may initialise a vendor runtime, e.g. CUDA, which must not happen before
  /// a fork); the backend is registered either way. Keeps the library loaded.
  std::function<std::string()> probe;
  std::string description;
  Capabilities caps;
  /// The plugin exports the optional stream symbol (tessera_comm_plugin_v1_stream): device
  /// buffers are ordered after their producers on the device, not by a host wait.
  bool device_stream = false;
};

/// Folders searched, in order: each entry of TESSERA_PLUGIN_PATH (':'-separated), the install's
/// <prefix>/lib/tessera/plugins (next to the running executable's ../lib), and the build tree's
/// plugin folder.
std::vector<std::string> plugin_search_path();

/// Loads the library at `path` and, when `registry` is given, registers its backend under the
/// name the plugin reports. Never throws: failures are described in the status.
PluginStatus load_plugin(const std::string& path, Registry* registry);

/// Loads every libtessera-comm-*.so found in `dirs` (first one of a name wins) into `registry`,
/// and reports the plugins this build knows of (ucx, nccl) that were not found.
std::vector<PluginStatus> load_plugins(Registry& registry,
                                       const std::vector<std::string>& dirs = plugin_search_path());

}  // namespace tessera::comm
