// `tessera sim compare`: a measured trace (`tessera train --trace`) beside a simulated one — a
// `tessera sim run --trace` file, or the simulation of the run description given by the options —
// as phases and layer groups (run::compare_traces, the studio's Compare view's numbers).
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "spec_options.hpp"
#include "tessera/run/phase_compare.hpp"

namespace tessera::tools {

namespace {

struct CompareArgs {
  SpecOptions spec{run::RunSpec::for_simulation()};
  std::string measured, simulated;
  bool json = false;
};

int run_compare(const CompareArgs& a) {
  const run::Comparison c = a.simulated.empty() ? run::compare_with_simulation(a.measured, a.spec.spec())
                                                : run::compare_trace_files(a.measured, a.simulated);
  std::printf("%s", a.json ? (c.to_json() + "\n").c_str() : c.table().c_str());
  return 0;
}

}  // namespace

void add_sim_compare_command(CLI::App& sim, Action& action) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* c = sim.add_subcommand("compare", "Compare a measured training trace with a simulated one, phase by "
                                              "phase and layer group by layer group");
  c->add_option("--measured", a->measured, "A trace of tessera train --trace")->required();
  c->add_option("--simulated", a->simulated,
                "A trace of tessera sim run --trace (default: simulate the configuration the options describe)");
  a->spec.add(*c, simulation_fields(), /*with_config=*/true);
  c->add_flag("--json", a->json, "Print one JSON object (rows[], measured, simulated, mismatch)");
  c->callback([&action, a] { action = [a] { return run_compare(*a); }; });
}

}  // namespace tessera::tools
