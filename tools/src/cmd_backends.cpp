// `tessera backends`: lists the communication and compute backends this build contains.
#include <cstdio>

#include "commands.hpp"
#include "tessera/builtin_backends.hpp"

namespace tessera::tools {

void add_backends_command(CLI::App& app, Action& action) {
  CLI::App* c = app.add_subcommand("backends", "List the communication and compute backends");
  c->callback([&action] {
    action = [] {
      comm::Registry comms;
      register_builtin_backends(comms);
      compute::Registry computes;
      register_builtin_backends(computes);
      std::printf("communication backends:\n");
      for (const auto& n : comms.names()) {
        const auto caps = comms.capabilities(n);
        std::printf("  %-8s loaded  (%s%s%s)\n", n.c_str(),
                    caps.multi_process ? "multi-process" : "in-process threads",
                    caps.cuda_memory ? ", CUDA memory" : ", host memory",
                    caps.split ? ", sub-groups" : "");
      }
      std::printf("compute backends:\n");
      for (const auto& n : computes.names()) std::printf("  %-8s loaded\n", n.c_str());
      return 0;
    };
  });
}

}  // namespace tessera::tools
