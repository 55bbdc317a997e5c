// `tessera sim run`: replays one training step of every rank on meta tensors and simulates the
// iteration on a topology — iteration time, per-device peak memory by category, busiest links,
// optionally a Chrome trace in the runtime's schema.
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "spec_options.hpp"
#include "tessera/run/simulate.hpp"
#include "tessera/sim/units.hpp"

namespace tessera::tools {

namespace {

struct SimRunArgs {
  SpecOptions spec{run::RunSpec::for_simulation()};
  bool json = false;
};

std::string coords_text(const std::vector<int>& coords) {
  std::string s;
  for (int c : coords) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

int run_sim(const SimRunArgs& a) {
  const run::RunSpec spec = a.spec.spec();
  // One replay per class of equivalent ranks and one simulated slab per kind (fold.hpp): exactly
  // what replaying and simulating every rank gives, in a fraction of the time on large meshes.
  // A trace simulates every rank, so that the timeline has a lane for each device.
  const run::SimRun run = run::simulate(spec, /*keep_trace=*/false, "tessera sim run");
  if (a.json) {
    std::printf("%s\n", run.to_json().c_str());
    return 0;
  }
  const sim::SimResult& r = run.result;
  const sim::DeviceCatalog& catalog = run.setup.catalog;
  const sim::Topology& topo = run.setup.topology;
  const auto& cfg = run.setup;
  const auto& t = cfg.train;
  std::printf("sim run: %s, input %s, batch %d, mesh %s (shard %s), checkpointing %s, %s, %s\n", t.model.name.c_str(),
              spec.input.c_str(), t.batch, cfg.mesh.to_string().c_str(), t.shard.c_str(), t.checkpointing.c_str(),
              t.optimizer.kind.c_str(), t.overlap ? "overlap" : "no overlap");
  std::printf("topology %s: %s\n", topo.name.c_str(), topo.describe().c_str());
  std::printf("iteration time  %s\n", sim::format_duration(r.iteration_ps).c_str());
  std::printf("peak memory per device (GB = 1e9 bytes; per-category peaks, total = peak of the sum):\n");
  std::printf("  %-4s %-6s %-10s %9s %9s %9s %9s %9s %9s %9s  %9s %9s\n", "rank", "coords", "device", "total", "param",
              "grad", "optim", "activ", "halo", "work", "compute", "comm");
  for (std::size_t i = 0; i < r.devices.size(); ++i) {
    const sim::DeviceResult& d = r.devices[i];
    const double cap = catalog.get(d.device).capacity_bytes;
    std::printf("  %-4d %-6s %-10s %9.3f", d.rank, coords_text(cfg.mesh.coords_of(d.rank)).c_str(), d.device.c_str(),
                d.memory.peak_total / 1e9);
    for (int c = 0; c < core::kNumMemCategories; ++c) std::printf(" %9.3f", d.memory.peak[c] / 1e9);
    std::printf("  %9s %9s%s\n", sim::format_duration(d.compute_busy_ps).c_str(),
                sim::format_duration(d.comm_busy_ps).c_str(), d.memory.peak_total > cap ? "  OOM" : "");
  }
  if (!r.links.empty()) {
    std::printf("busiest links:\n");
    for (std::size_t i = 0; i < r.links.size() && i < 4; ++i)
      std::printf("  %s -> %s (%s): %s, %.1f%% utilised\n", r.links[i].from.c_str(), r.links[i].to.c_str(),
                  r.links[i].kind.c_str(), sim::format_bytes(static_cast<std::int64_t>(r.links[i].bytes)).c_str(),
                  100 * r.links[i].utilisation);
  }
  if (!spec.trace.empty()) std::printf("trace written to %s\n", spec.trace.c_str());
  return 0;
}

}  // namespace

void add_sim_run_command(CLI::App& sim, Action& action) {
  auto a = std::make_shared<SimRunArgs>();
  CLI::App* c = sim.add_subcommand("run", "Simulate one training iteration (memory from a meta replay of the real "
                                          "trainer, time from the event engine)");
  std::vector<std::string> fields = simulation_fields();
  fields.push_back("trace");
  a->spec.add(*c, fields, /*with_config=*/true);
  c->add_flag("--json", a->json, "Print one JSON object (iteration_time_s, devices[].memory_bytes, ...)");
  c->callback([&action, a] { action = [a] { return run_sim(*a); }; });
}

}  // namespace tessera::tools
