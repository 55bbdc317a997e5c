// The plugin search path: TESSERA_PLUGIN_PATH, the install's plugin folder, the build's.
#include "tessera/plugin_path.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#ifndef TESSERA_BUILD_PLUGIN_DIR
#define TESSERA_BUILD_PLUGIN_DIR ""
#endif

namespace tessera {

namespace fs = std::filesystem;

std::vector<std::string> plugin_search_path() {
  std::vector<std::string> dirs;
  if (const char* p = std::getenv("TESSERA_PLUGIN_PATH")) {
    std::string s = p;
    std::size_t start = 0;
    while (start <= s.size()) {
      const auto end = s.find(':', start);
      const std::string d =
          s.substr(start, end == std::string::npos ? std::string::npos : end - start);
      if (!d.empty()) dirs.push_back(d);
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    dirs.push_back((exe.parent_path().parent_path() / "lib" / "tessera" / "plugins").string());
  if (std::string(TESSERA_BUILD_PLUGIN_DIR).size()) dirs.push_back(TESSERA_BUILD_PLUGIN_DIR);
  std::vector<std::string> unique;
  for (const auto& d : dirs)
    if (std::find(unique.begin(), unique.end(), d) == unique.end()) unique.push_back(d);
  return unique;
}

std::string find_plugin_file(const std::string& file) {
  for (const auto& d : plugin_search_path()) {
    std::error_code ec;
    const fs::path p = fs::path(d) / file;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

}  // namespace tessera
