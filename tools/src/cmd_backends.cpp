// `tessera backends`: lists the communication backends (built in and plugins: loaded, or why
// not, or loaded but unable to run here, e.g. "nccl  built, no CUDA device visible") and the
// compute backends this build contains.
#include <cstdio>

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

void add_backends_command(CLI::App& app, Action& action) {
  CLI::App* c = app.add_subcommand("backends", "List the communication and compute backends (and plugins)");
  c->callback([&action] {
    action = [] {
      comm::Registry comms;
      register_builtin_backends(comms);
      std::printf("communication backends:\n");
      for (const auto& n : comms.names())
        std::printf("  %-8s built in  (%s)\n", n.c_str(), caps_text(comms.capabilities(n)).c_str());
      for (const auto& st : register_plugin_backends(comms)) {
        const std::string unusable = st.loaded && st.probe ? st.probe() : "";
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
        if (unusable.empty())
          std::printf("  %-8s built in\n", n.c_str());
        else
          std::printf("  %-8s built, %s\n", n.c_str(), unusable.c_str());
      }
      return 0;
    };
  });
}

}  // namespace tessera::tools
