// Host-side loader of the cuda compute backend: dlopen of libtessera_compute_cuda.so on first use,
// its versioned entry point, and the "cuda" factory. Plain C++: no CUDA header, no CUDA library.
#include <dlfcn.h>

#include <mutex>

#include "tessera/compute/cuda.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"
#include "tessera/plugin_path.hpp"

namespace tessera::compute::cuda {

namespace {

struct Loaded {
  const PluginV1* table = nullptr;
  std::string why;  // why loading failed
};

Loaded open_plugin() {
  Loaded l;
  const std::string path = find_plugin_file(kLibraryFile);
  if (path.empty()) {
    std::string where;
    for (const auto& d : plugin_search_path()) where += (where.empty() ? "" : ", ") + d;
    l.why = detail::cat(kLibraryFile, " not found in ", where.empty() ? "(no folders)" : where,
                        " (build target tessera_compute_cuda, or set TESSERA_PLUGIN_PATH)");
    return l;
  }
  // Kept open for the life of the process: backends created from it may live until exit.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = ::dlerror();
    l.why = detail::cat("cannot load ", path, ": ", e ? e : "unknown dlopen error",
                        " (is cuDNN/cuBLAS on the library path? check with ldd)");
    return l;
  }
  auto* entry = reinterpret_cast<PluginV1Fn>(::dlsym(handle, kEntrySymbol));
  if (!entry) {
    l.why = detail::cat(path, " lacks the entry point ", kEntrySymbol,
                        "; rebuild it with this tessera");
    return l;
  }
  const PluginV1* t = entry();
  if (!t || t->api_version != kPluginApiV1 || !t->probe || !t->create) {
    l.why = detail::cat(path, " reports api_version ", t ? t->api_version : -1, ", expected ",
                        kPluginApiV1, " with probe and create; rebuild it with this tessera");
    return l;
  }
  l.table = t;
  // What the library reports (warn_cuda in a destructor) reaches this process's sink.
  if (auto* set_report = reinterpret_cast<SetReportFn>(::dlsym(handle, kReportSymbol)))
    set_report([](int level, const char* m) {
      core::report(level == 0 ? core::ReportLevel::Info : core::ReportLevel::Warning, m ? m : "");
    });
  return l;
}

const Loaded& loaded() {
  static std::once_flag once;
  static Loaded l;
  std::call_once(once, [] { l = open_plugin(); });
  return l;
}

}  // namespace

const PluginV1& load_plugin() {
  const Loaded& l = loaded();
  if (!l.table) throw Unsupported("cuda: " + l.why);
  return *l.table;
}

std::unique_ptr<compute::Backend> create(const BackendOptions& options) {
  return load_plugin().create(options);
}

bool plugin_loaded() { return loaded().table != nullptr; }

std::string why_unusable() {
  const Loaded& l = loaded();
  if (!l.table) return l.why;
  return l.table->probe();
}

}  // namespace tessera::compute::cuda
