// The folders tessera searches for the shared libraries it loads at run time: comm plugins
// (libtessera-comm-*.so) and the cuda compute backend (libtessera_compute_cuda.so).
#pragma once

#include <string>
#include <vector>

namespace tessera {

/// Folders searched, in order, without duplicates: each entry of TESSERA_PLUGIN_PATH
/// (':'-separated), the install's <prefix>/lib/tessera/plugins (next to the running executable's
/// ../lib), and the build tree's plugin folder.
std::vector<std::string> plugin_search_path();

/// The first `<dir>/<file>` of plugin_search_path() that exists, or "" when none does.
std::string find_plugin_file(const std::string& file);

}  // namespace tessera
