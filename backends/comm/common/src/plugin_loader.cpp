// The plugin loader: dlopen, the newest-first versioned entry point, the api_version check, and
// registration of a PluginBackend factory.
#include "tessera/comm/plugin_loader.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "plugin_backend.hpp"
#include "tessera/comm/plugin_export.hpp"
#include "tessera/comm/plugin_v1.h"
#include "tessera/core/error.hpp"
#include "tessera/plugin_path.hpp"

namespace tessera::comm {

namespace fs = std::filesystem;

std::vector<std::string> plugin_search_path() { return tessera::plugin_search_path(); }

namespace {

/// "libtessera-comm-ucx.so" -> "ucx".
std::string name_from_file(const std::string& file) {
  const std::string pre = "libtessera-comm-", post = ".so";
  if (file.rfind(pre, 0) != 0 || file.size() <= pre.size() + post.size() ||
      file.compare(file.size() - post.size(), post.size(), post) != 0)
    return "";
  return file.substr(pre.size(), file.size() - pre.size() - post.size());
}

}  // namespace

PluginStatus load_plugin(const std::string& path, Registry* registry) {
  PluginStatus st;
  st.path = path;
  st.name = name_from_file(fs::path(path).filename().string());
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = ::dlerror();
    st.why = detail::cat("cannot load ", path, ": ", e ? e : "unknown dlopen error",
                         " (a library it needs is missing? check with ldd)");
    return st;
  }
  auto lib = std::shared_ptr<void>(handle, [](void* h) { ::dlclose(h); });
  // Newest first: this host knows version 1 only; a plugin exporting only newer or older entry
  // points is reported, not guessed at.
  auto* entry = reinterpret_cast<tessera_comm_plugin_v1_fn>(::dlsym(handle, TESSERA_COMM_PLUGIN_V1_SYMBOL));
  if (!entry) {
    std::string others;
    for (const char* v : {"tessera_comm_plugin_v2", "tessera_comm_plugin_v3", "tessera_comm_plugin_v0"})
      if (::dlsym(handle, v)) others += (others.empty() ? "" : ", ") + std::string(v);
    st.why = others.empty()
                 ? detail::cat("missing symbol ", TESSERA_COMM_PLUGIN_V1_SYMBOL, " in ", path,
                               ": not a tessera comm plugin (see docs/backends.md, 'the entry point')")
                 : detail::cat("wrong version: ", path, " exports ", others, " but this tessera loads ",
                               TESSERA_COMM_PLUGIN_V1_SYMBOL, "; rebuild the plugin against this tessera");
    return st;
  }
  const tessera_comm_plugin_v1_t* table = entry();
  if (!table) {
    st.why = detail::cat(path, ": ", TESSERA_COMM_PLUGIN_V1_SYMBOL, "() returned NULL");
    return st;
  }
  if (table->api_version != TESSERA_COMM_PLUGIN_API_V1) {
    st.why = detail::cat("wrong version: ", path, " reports api_version ", table->api_version, ", expected ",
                         TESSERA_COMM_PLUGIN_API_V1, "; rebuild the plugin against this tessera");
    return st;
  }
  if (!table->name || !*table->name || !table->create || !table->destroy || !table->all_reduce ||
      !table->wait || !table->test || !table->free_request || !table->batch_p2p || !table->barrier) {
    st.why = detail::cat(path, ": the plugin table lacks a name or a required function");
    return st;
  }
  st.name = table->name;
  st.description = table->description ? table->description : "";
  st.caps = plugin::caps_from_c(table->caps);
  if (auto* probe = reinterpret_cast<tessera_comm_plugin_v1_probe_fn>(
          ::dlsym(handle, TESSERA_COMM_PLUGIN_V1_PROBE_SYMBOL)))
    st.probe = [lib, probe]() -> std::string {
      const char* why_not = probe();
      return why_not ? why_not : "";
    };
  if (auto* overlaps = reinterpret_cast<tessera_comm_plugin_v1_overlaps_fn>(
          ::dlsym(handle, TESSERA_COMM_PLUGIN_V1_OVERLAPS_SYMBOL)))
    st.caps.overlaps_compute = overlaps() != 0;
  PluginExtras extras;
  extras.moved = reinterpret_cast<tessera_comm_plugin_v1_moved_fn>(
      ::dlsym(handle, TESSERA_COMM_PLUGIN_V1_MOVED_SYMBOL));
  extras.stream = reinterpret_cast<tessera_comm_plugin_v1_stream_fn>(
      ::dlsym(handle, TESSERA_COMM_PLUGIN_V1_STREAM_SYMBOL));
  st.device_stream = extras.stream != nullptr;
  const Capabilities caps = st.caps;
  if (registry) {
    if (registry->contains(st.name)) {
      st.why = detail::cat("a backend named '", st.name, "' is already registered; ", path, " ignored");
      return st;
    }
    registry->add(
        st.name,
        [lib, table, extras, caps](const BackendOptions& o) {
          return make_plugin_backend(lib, table, extras, caps, o);
        },
        st.caps);
  }
  st.loaded = true;
  return st;
}

std::vector<PluginStatus> load_plugins(Registry& registry, const std::vector<std::string>& dirs) {
  std::vector<PluginStatus> out;
  std::set<std::string> seen;
  for (const auto& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(d, ec)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const std::string name = name_from_file(f.filename().string());
      if (name.empty() || seen.count(name)) continue;
      seen.insert(name);
      out.push_back(load_plugin(f.string(), &registry));
    }
  }
  std::string where;
  for (const auto& d : dirs) where += (where.empty() ? "" : ", ") + d;
  for (const char* known : {"ucx", "nccl"}) {
    if (seen.count(known)) continue;
    PluginStatus st;
    st.name = known;
    st.why = detail::cat("missing library: libtessera-comm-", known, ".so not found in ",
                         where.empty() ? "(no folders)" : where,
                         " (not built here, or set TESSERA_PLUGIN_PATH)");
    out.push_back(st);
  }
  return out;
}

}  // namespace tessera::comm
