// The backends of this tessera: the communication backends (built in, and plugins: loaded, or why
// not, or loaded but unable to run here) and the compute backends with the cpu backend's kernels,
// as data, as the text `tessera backends` prints and as its --json; and the check behind its
// --require.
#pragma once

#include <string>
#include <vector>

#include "tessera/comm/backend.hpp"
#include "tessera/run/cpu_kernels.hpp"

namespace tessera::run {

/// One backend of this build.
struct BackendEntry {
  std::string name;
  bool plugin = false;  ///< a comm backend from a library on the plugin path
  bool loaded = false;  ///< its code is in this process
  /// Not loaded: why not. Loaded: why it cannot run in this process ("no CUDA device visible
  /// (...)"), "" when it can.
  std::string why;
  std::string path;         ///< a plugin's library file
  comm::Capabilities caps;  ///< comm backends: what they do
};

/// Every backend, in the order they were found.
struct BackendListing {
  std::vector<BackendEntry> comm;     ///< built-ins, then plugins (and plugins known but not found)
  std::vector<BackendEntry> compute;  ///< built-ins ("cpu", and "cuda" where built with CUDA)
  std::vector<std::string> plugin_dirs;  ///< the folders searched for plugins
  CpuKernels cpu;                        ///< what the cpu compute backend runs here

  /// The entry named `name` (a compute backend before a comm one of the same name), or nullptr.
  const BackendEntry* find(const std::string& name) const;
  /// The text of `tessera backends`.
  std::string to_text() const;
  /// The same as one JSON object (`tessera backends --json`): comm[], plugin_dirs[], compute[],
  /// cpu_kernels (CpuKernels::to_json).
  std::string to_json() const;
};

/// Registers the built-in backends, loads the comm plugins and asks each backend whether it can
/// run here (which initialises the CUDA runtime where cuda is built: never call it before a fork).
BackendListing list_backends();

/// What --require found: `status` 0 every named backend can run here; 1 one is not built or its
/// library does not load; 3 all load but one cannot run in this process. One sentence per
/// problem, e.g. "required backend 'cuda' loads but cannot run here: no CUDA device visible ...".
struct RequireCheck {
  int status = 0;
  std::vector<std::string> problems;
};
RequireCheck check_required(const BackendListing& listing, const std::vector<std::string>& names);

}  // namespace tessera::run
