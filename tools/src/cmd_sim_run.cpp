// `tessera sim run`: replays one training step of every rank on meta tensors and simulates the
// iteration on a topology — iteration time, per-device peak memory by category, busiest links,
// optionally a Chrome trace in the runtime's schema.
#include <cstdio>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/core/trace.hpp"
#include "tessera/sim/engine.hpp"
#include "tessera/sim/fold.hpp"
#include "tessera/sim/units.hpp"
#include "sim_setup.hpp"
#include "train_run.hpp"

namespace tessera::tools {

namespace {

struct SimRunArgs {
  TrainArgs train;
  std::string topology = "dgx-a100";
  std::string device;
  std::string trace;
  std::string calibration;
  bool json = false;
  bool tf32 = false;
  int bucket_mib = 4;
};

const char* kCategoryKeys[] = {"parameter", "gradient", "optimizer_state", "activation", "halo_buffer", "workspace"};

std::string memory_json(const core::MemStats& m) {
  std::ostringstream os;
  os << "{";
  for (int c = 0; c < core::kNumMemCategories; ++c) os << (c ? ", " : "") << "\"" << kCategoryKeys[c] << "\": " << m.peak[c];
  os << "}";
  return os.str();
}

std::string coords_text(const std::vector<int>& coords) {
  std::string s;
  for (int c : coords) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

int run_sim(const SimRunArgs& a) {
  TrainRunConfig cfg = make_train_config(a.train);
  TESSERA_CHECK(a.bucket_mib >= 1, "--bucket-mib ", a.bucket_mib, " must be at least 1");
  cfg.train.bucket_bytes = std::size_t(a.bucket_mib) << 20;
  const SimSetup setup = make_sim_setup(a.topology, a.calibration);
  const sim::DeviceCatalog& catalog = setup.catalog;
  const sim::Topology& topo = setup.topology;
  sim::EngineOptions eo = setup.options;
  eo.device = a.device;
  eo.tf32 = a.tf32;
  if (!a.device.empty()) catalog.get(a.device);  // an unknown name fails here, naming the devices
  // One replay per class of equivalent ranks and one simulated slab per kind (fold.hpp): exactly
  // what replaying and simulating every rank gives, in a fraction of the time on large meshes.
  // A trace simulates every rank, so that the timeline has a lane for each device.
  const sim::FoldedReplay folded = sim::replay_folded(cfg.train, cfg.mesh);
  const sim::SimResult r = sim::simulate_iteration(folded, topo, catalog, eo, /*fold_engine=*/a.trace.empty());
  const double iter_s = static_cast<double>(r.iteration_ps) / sim::kPicosPerSecond;
  if (!a.trace.empty()) {
    std::ostringstream os;
    core::write_chrome_trace(os, r.trace, r.process_names,
                             {{"source", "tessera sim run"}, {"model", cfg.train.model.name},
                              {"mesh", cfg.mesh.to_string()}, {"topology", topo.name}});
    core::write_file_atomic(a.trace, os.str());
  }
  if (a.json) {
    std::printf("{\"model\": \"%s\", \"mesh\": \"%s\", \"topology\": \"%s\", \"iteration_time_s\": %.9g, \"devices\": [",
                cfg.train.model.name.c_str(), cfg.mesh.to_string().c_str(), topo.name.c_str(), iter_s);
    for (std::size_t i = 0; i < r.devices.size(); ++i) {
      const sim::DeviceResult& d = r.devices[i];
      std::printf("%s\n  {\"rank\": %d, \"coords\": [%s], \"device\": \"%s\", \"peak_memory_bytes\": %zu, "
                  "\"memory_bytes\": %s, \"compute_busy_s\": %.9g, \"comm_busy_s\": %.9g}",
                  i ? "," : "", d.rank, coords_text(cfg.mesh.coords_of(d.rank)).c_str(), d.device.c_str(), d.memory.peak_total,
                  memory_json(d.memory).c_str(), d.compute_busy_ps / 1e12, d.comm_busy_ps / 1e12);
    }
    std::printf("],\n \"links\": [");
    for (std::size_t i = 0; i < r.links.size(); ++i)
      std::printf("%s\n  {\"from\": \"%s\", \"to\": \"%s\", \"kind\": \"%s\", \"bytes\": %.0f, \"utilisation\": %.6g}",
                  i ? "," : "", r.links[i].from.c_str(), r.links[i].to.c_str(), r.links[i].kind.c_str(),
                  r.links[i].bytes, r.links[i].utilisation);
    std::printf("]}\n");
    return 0;
  }
  const auto& t = cfg.train;
  std::printf("sim run: %s, input %s, batch %d, mesh %s (shard %s), checkpointing %s, %s, %s\n", t.model.name.c_str(),
              a.train.input.c_str(), t.batch, cfg.mesh.to_string().c_str(), t.shard.c_str(), t.checkpointing.c_str(),
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
  if (!a.trace.empty()) std::printf("trace written to %s\n", a.trace.c_str());
  return 0;
}

}  // namespace

void add_sim_run_command(CLI::App& sim, Action& action) {
  auto a = std::make_shared<SimRunArgs>();
  a->train.task = "classify";
  a->train.classes = 1000;
  a->train.mesh = "sp=4";
  a->train.steps = 1;
  CLI::App* c = sim.add_subcommand("run", "Simulate one training iteration (memory from a meta replay of the real "
                                          "trainer, time from the event engine)");
  c->add_option("--model", a->train.model, "Model preset or JSON model file")->capture_default_str();
  c->add_option("--input", a->train.input, "Image size CxHxW")->capture_default_str();
  c->add_option("--batch", a->train.batch, "Global batch size")->capture_default_str();
  c->add_option("--mesh", a->train.mesh, "Device mesh: sp=4, dp=2,sp=2, sp_h=2,sp_w=2")->capture_default_str();
  c->add_option("--shard", a->train.shard, "W or H (for a mesh dim named sp)")->capture_default_str();
  c->add_option("--checkpointing", a->train.checkpointing, "none, block or stage")->capture_default_str();
  c->add_option("--optimizer", a->train.optimizer, "sgd or adamw")->capture_default_str();
  c->add_option("--task", a->train.task, "classify or segment")->capture_default_str();
  c->add_option("--classes", a->train.classes, "Number of classes")->capture_default_str();
  c->add_option("--topology", a->topology, "A preset (tessera sim --list) or a topology JSON file")
      ->capture_default_str();
  c->add_option("--device", a->device, "Device model for every rank (default: the topology's)");
  c->add_option("--calibration", a->calibration,
                 "A tessera calibrate file: its device (cpu-host, with the measured shared-memory links of the "
                 "cpu-host presets) and kernel rates replace the built-in figures");
  c->add_option("--bucket-mib", a->bucket_mib, "Gradient all-reduce bucket size in MiB")->capture_default_str();
  c->add_flag("--no-overlap", a->train.no_overlap, "Do not overlap halo exchange and gradient all-reduce");
  c->add_flag("--tf32", a->tf32, "Time convolutions at the TF32 tensor-core peak");
  c->add_flag("--json", a->json, "Print one JSON object (iteration_time_s, devices[].memory_bytes, ...)");
  c->add_option("--trace", a->trace,
                 "Write the simulated timeline as Chrome-trace JSON (Perfetto); every rank is then simulated, "
                 "not one per class of equivalent ranks");
  c->callback([&action, a] { action = [a] { return run_sim(*a); }; });
}

}  // namespace tessera::tools
