// `tessera backends`: lists the communication backends (built in and plugins: loaded, or why
// not, or loaded but unable to run here, e.g. "nccl  built, no CUDA device visible") and the
// compute backends this build contains, with the kernels the cpu backend runs (oneDNN's version,
// ISA and implementations, or why not; Auto's convolution path per class and dtype); --json gives
// the same as one JSON object. With --require NAME[,NAME...] it also says whether the
// named ones can run here, in its exit status: 0 they can; 1 one is not built, or its library does
// not load; 3 all loaded, but one cannot run in this process (no CUDA device visible, a driver too
// old). The GPU check's bundle (tests/gpu/run.sh) uses it.
#include <cstdio>
#include <memory>
#include <vector>

#include "commands.hpp"
#include "tessera/run/backends.hpp"

namespace tessera::tools {

void add_backends_command(CLI::App& app, Action& action) {
  CLI::App* c =
      app.add_subcommand("backends", "List the communication and compute backends (and plugins)");
  auto required = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  c->add_option("--require", *required,
                "Backends (comm or compute) that must run here: exit 1 if one is not built or "
                "does not load, 3 if all load but one cannot run in this process (no device)")
      ->delimiter(',');
  c->add_flag("--json", *json,
              "Print one JSON object (comm[], plugin_dirs[], compute[], cpu_kernels{onednn, "
              "conv_paths, other_ops})");
  c->callback([&action, required, json] {
    action = [required, json] {
      const run::BackendListing listing = run::list_backends();
      std::fputs(*json ? (listing.to_json() + "\n").c_str() : listing.to_text().c_str(), stdout);
      const run::RequireCheck check = run::check_required(listing, *required);
      for (const std::string& problem : check.problems)
        std::fprintf(stderr, "tessera backends: %s\n", problem.c_str());
      return check.status;
    };
  });
}

}  // namespace tessera::tools
