// `tessera backends`: lists the communication backends (built in and plugins: loaded, or why
// not, or loaded but unable to run here, e.g. "nccl  built, no CUDA device visible") and the
// compute backends this build contains. With --require NAME[,NAME...] it also says whether the
// named ones can run here, in its exit status: 0 they can; 1 one is not built, or its library does
// not load; 3 all loaded, but one cannot run in this process (no CUDA device visible, a driver too
// old). The GPU check's bundle (tests/gpu/run.sh) uses it.
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "commands.hpp"
#include "tessera/builtin_backends.hpp"

namespace tessera::tools {

namespace {
std::string caps_text(const comm::Capabilities& caps) {
  std::string s = caps.multi_process ? "multi-process" : "in-process threads";
  s += !caps.cuda_memory ? ", host memory"
       : caps.cuda_staged ? ", host memory, CUDA memory staged through pinned host buffers"
                          : ", CUDA memory";
  if (caps.split) s += ", sub-groups";
  if (caps.all_to_all) s += ", all_to_all";
  if (caps.overlaps_compute) s += ", progresses while the caller computes";
  return s;
}
}  // namespace

namespace {
/// What --require checks of one backend: loaded (its code is in this process) and why it cannot
/// run here ("" when it can).
struct Usable {
  bool loaded = false;
  std::string why;
};
}  // namespace

void add_backends_command(CLI::App& app, Action& action) {
  CLI::App* c = app.add_subcommand("backends", "List the communication and compute backends (and plugins)");
  auto required = std::make_shared<std::vector<std::string>>();
  c->add_option("--require", *required,
                "Backends (comm or compute) that must run here: exit 1 if one is not built or "
                "does not load, 3 if all load but one cannot run in this process (no device)")
      ->delimiter(',');
  c->callback([&action, required] {
    action = [required] {
      std::map<std::string, Usable> seen;
      comm::Registry comms;
      register_builtin_backends(comms);
      std::printf("communication backends:\n");
      for (const auto& n : comms.names()) {
        std::printf("  %-8s built in  (%s)\n", n.c_str(), caps_text(comms.capabilities(n)).c_str());
        seen[n] = {true, ""};
      }
      for (const auto& st : register_plugin_backends(comms)) {
        const std::string unusable = st.loaded && st.probe ? st.probe() : "";
        seen[st.name] = {st.loaded, st.loaded ? unusable : st.why};
        if (!unusable.empty())
          std::printf("  %-8s built, %s; loaded from %s (%s)\n", st.name.c_str(), unusable.c_str(),
                      st.path.c_str(), caps_text(st.caps).c_str());
        else if (st.loaded)
          std::printf("  %-8s loaded    (%s) from %s\n", st.name.c_str(), caps_text(st.caps).c_str(), st.path.c_str());
        else
          std::printf("  %-8s not loaded: %s\n", st.name.c_str(), st.why.c_str());
      }
      std::printf("plugin folders searched:");
      for (const auto& d : comm::plugin_search_path()) std::printf(" %s", d.c_str());
      std::printf("\ncompute backends:\n");
      compute::Registry computes;
      register_builtin_backends(computes);
      for (const auto& n : computes.names()) {
        const std::string unusable = compute_backend_unusable(n);
        seen[n] = {compute_backend_loaded(n), unusable};
        if (unusable.empty())
          std::printf("  %-8s built in\n", n.c_str());
        else
          std::printf("  %-8s built, %s\n", n.c_str(), unusable.c_str());
      }
      int status = 0;
      for (const auto& name : *required) {
        const auto it = seen.find(name);
        if (it == seen.end()) {
          std::string known;
          for (const auto& [n, u] : seen) known += (known.empty() ? "" : ", ") + n;
          std::fprintf(stderr,
                       "tessera backends: required backend '%s' is not in this build (it has %s)\n",
                       name.c_str(), known.c_str());
          status = 1;
        } else if (!it->second.loaded) {
          std::fprintf(stderr, "tessera backends: required backend '%s' does not load: %s\n",
                       name.c_str(), it->second.why.c_str());
          status = 1;
        } else if (!it->second.why.empty()) {
          std::fprintf(stderr,
                       "tessera backends: required backend '%s' loads but cannot run here: %s\n",
                       name.c_str(), it->second.why.c_str());
          if (status == 0) status = 3;
        }
      }
      return status;
    };
  });
}

}  // namespace tessera::tools
