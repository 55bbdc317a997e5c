// list_backends and check_required: the registries of this build and the plugin loader, asked
// once, and their listing written in one place.
#include "tessera/run/backends.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "tessera/builtin_backends.hpp"

namespace tessera::run {
namespace {

std::string caps_text(const comm::Capabilities& caps) {
  std::string s = caps.multi_process ? "multi-process" : "in-process threads";
  s += !caps.cuda_memory  ? ", host memory"
       : caps.cuda_staged ? ", host memory, CUDA memory staged through pinned host buffers"
                          : ", CUDA memory";
  if (caps.split) s += ", sub-groups";
  if (caps.all_to_all) s += ", all_to_all";
  if (caps.overlaps_compute) s += ", progresses while the caller computes";
  return s;
}

/// printf into a std::string (the listing's columns are printf widths).
template <class... Args>
std::string format(const char* fmt, Args... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  std::string s(static_cast<std::size_t>(n), '\0');
  std::snprintf(s.data(), s.size() + 1, fmt, args...);
  return s;
}

std::string comm_line(const BackendEntry& e) {
  const char* name = e.name.c_str();
  if (!e.plugin) return format("  %-8s built in  (%s)\n", name, caps_text(e.caps).c_str());
  if (e.loaded && !e.why.empty())
    return format("  %-8s built, %s; loaded from %s (%s)\n", name, e.why.c_str(), e.path.c_str(),
                  caps_text(e.caps).c_str());
  if (e.loaded)
    return format("  %-8s loaded    (%s) from %s\n", name, caps_text(e.caps).c_str(),
                  e.path.c_str());
  return format("  %-8s not loaded: %s\n", name, e.why.c_str());
}

}  // namespace

const BackendEntry* BackendListing::find(const std::string& name) const {
  for (const BackendEntry& e : compute)
    if (e.name == name) return &e;
  const BackendEntry* found = nullptr;  // the last one: a plugin over a built-in of its name
  for (const BackendEntry& e : comm)
    if (e.name == name) found = &e;
  return found;
}

std::string BackendListing::to_text() const {
  std::string s = "communication backends:\n";
  for (const BackendEntry& e : comm) s += comm_line(e);
  s += "plugin folders searched:";
  for (const std::string& d : plugin_dirs) s += " " + d;
  s += "\ncompute backends:\n";
  for (const BackendEntry& e : compute) {
    s += e.why.empty() ? format("  %-8s built in\n", e.name.c_str())
                       : format("  %-8s built, %s\n", e.name.c_str(), e.why.c_str());
    if (e.name == "cpu" && !cpu.conv.empty()) s += cpu.to_text("           ");  // probed
  }
  return s;
}

std::string BackendListing::to_json() const {
  using Json = nlohmann::ordered_json;
  Json comms = Json::array(), computes = Json::array();
  for (const BackendEntry& e : comm)
    comms.push_back({{"name", e.name},
                     {"plugin", e.plugin},
                     {"loaded", e.loaded},
                     {"why", e.why},
                     {"path", e.path},
                     {"capabilities", e.loaded ? caps_text(e.caps) : ""}});
  for (const BackendEntry& e : compute)
    computes.push_back({{"name", e.name}, {"loaded", e.loaded}, {"why", e.why}});
  return Json{{"comm", comms},
              {"plugin_dirs", plugin_dirs},
              {"compute", computes},
              {"cpu_kernels", Json::parse(cpu.to_json())}}
      .dump(2);
}

BackendListing list_backends() {
  BackendListing l;
  comm::Registry comms;
  register_builtin_backends(comms);
  for (const auto& n : comms.names())
    l.comm.push_back({n, false, true, "", "", comms.capabilities(n)});
  for (const auto& st : register_plugin_backends(comms)) {
    const std::string unusable = st.loaded && st.probe ? st.probe() : "";
    l.comm.push_back({st.name, true, st.loaded, st.loaded ? unusable : st.why, st.path, st.caps});
  }
  l.plugin_dirs = comm::plugin_search_path();
  compute::Registry computes;
  register_builtin_backends(computes);
  for (const auto& n : computes.names()) {
    const std::string unusable = compute_backend_unusable(n);  // first: it loads cuda's library
    l.compute.push_back({n, false, compute_backend_loaded(n), unusable, "", {}});
  }
  l.cpu = cpu_kernels();
  return l;
}

RequireCheck check_required(const BackendListing& l, const std::vector<std::string>& names) {
  RequireCheck c;
  for (const std::string& name : names) {
    const BackendEntry* e = l.find(name);
    if (!e) {
      std::set<std::string> all;
      for (const auto& x : l.comm) all.insert(x.name);
      for (const auto& x : l.compute) all.insert(x.name);
      std::string known;
      for (const auto& n : all) known += (known.empty() ? "" : ", ") + n;
      c.problems.push_back("required backend '" + name + "' is not in this build (it has " + known +
                           ")");
      c.status = 1;
    } else if (!e->loaded) {
      c.problems.push_back("required backend '" + name + "' does not load: " + e->why);
      c.status = 1;
    } else if (!e->why.empty()) {
      c.problems.push_back("required backend '" + name + "' loads but cannot run here: " + e->why);
      if (c.status == 0) c.status = 3;
    }
  }
  return c;
}

}  // namespace tessera::run
