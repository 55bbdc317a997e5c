// `tessera sim memory`: the per-GPU memory table of a model over input sizes for four setups —
// unsharded, block checkpointing, P-way spatial sharding, both — from meta replays of the real
// trainer (the largest rank of each mesh), activation-only and total, with OOM against a device.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "tessera/sim/devices.hpp"
#include "tessera/sim/fold.hpp"
#include "tessera/sim/replay.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/precision.hpp"
#include "tessera/run/resolve.hpp"

namespace tessera::tools {

namespace {

run::RunSpec memory_defaults() {
  run::RunSpec s = run::RunSpec::for_simulation();
  s.model = "convnext-xl";
  s.batch = 7;
  return s;
}

struct MemoryTableArgs {
  run::RunSpec train = memory_defaults();
  std::string inputs = "3x512x1024,3x512x2048,3x512x4096";
  int sp = 4;
  std::string device = "a100-80gb";
  std::string precision = "fp32";  ///< bf16/fp16: a second table in that precision beside the fp32 one
};

struct Cell {
  std::size_t total = 0, activation = 0, halo = 0;
};

// The largest figures over the ranks of one setup.
Cell replay_cell(run::RunSpec t, const std::string& input, int sp, const std::string& checkpointing) {
  t.input = input;
  t.mesh = "sp=" + std::to_string(sp);
  t.checkpointing = checkpointing;
  const run::TrainSetup cfg = run::resolve_train(t, /*check_backend=*/false);
  Cell c;
  const sim::FoldedReplay folded = sim::replay_folded(cfg.train, cfg.mesh, cfg.mesh_comm);  // one replay per class
  for (const sim::RankReplay& r : folded.classes) {
    c.total = std::max(c.total, r.memory.peak_total);
    c.activation = std::max(c.activation, r.memory.peak_of(core::MemCategory::Activation));
    c.halo = std::max(c.halo, r.memory.peak_of(core::MemCategory::HaloBuffer));
  }
  return c;
}

void print_table(const MemoryTableArgs& a, const std::vector<std::string>& inputs, double cap,
                 const std::string& precision, std::vector<Cell>& cells) {
  const std::string sp = "sp=" + std::to_string(a.sp);
  run::RunSpec t = a.train;
  t.precision = precision;
  std::printf("\n%s:\n", precision.c_str());
  std::printf("%-12s | %-19s | %-19s | %-19s | %-19s\n", "input", "unsharded", "block ckpt", sp.c_str(),
              (sp + " + block").c_str());
  for (const std::string& in : inputs) {
    std::printf("%-12s", in.c_str());
    for (const auto& [n, ck] : {std::pair{1, "none"}, {1, "block"}, {a.sp, "none"}, {a.sp, "block"}}) {
      const Cell c = replay_cell(t, in, n, ck);
      cells.push_back(c);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2f act / %.2f%s", c.activation / 1e9, c.total / 1e9,
                    c.total > cap ? " OOM" : "");
      std::printf(" | %-19s", buf);
    }
    std::printf("\n");
  }
}

int run_memory_table(const MemoryTableArgs& a) {
  const sim::DeviceCatalog catalog;
  const double cap = catalog.get(a.device).capacity_bytes;
  TESSERA_CHECK(nn::parse_precision(a.precision), "--precision '", a.precision, "': expected fp32, bf16 or fp16");
  std::vector<std::string> inputs;
  std::stringstream ss(a.inputs);
  for (std::string s; std::getline(ss, s, ',');) inputs.push_back(s);
  std::printf("peak memory per GPU from meta replays: model %s, batch %d, %s, device %s (%.1f GB)\n",
              a.train.model.c_str(), a.train.batch, a.train.optimizer.c_str(), a.device.c_str(), cap / 1e9);
  std::printf("GB = 1e9 bytes; 'total' = parameters + gradients + optimizer state + activations + halo buffers + "
              "workspace at the step's peak; 'act' = the activation peak alone (halo buffers apart); OOM = total "
              "above the device\n");
  std::vector<Cell> full, mixed;
  print_table(a, inputs, cap, "fp32", full);
  if (*nn::parse_precision(a.precision) == nn::Precision::FP32) return 0;
  print_table(a, inputs, cap, a.precision, mixed);
  std::printf("\n%s / fp32, activation peak:", a.precision.c_str());
  for (std::size_t i = 0; i < full.size(); ++i)
    std::printf(" %.3f", full[i].activation ? double(mixed[i].activation) / double(full[i].activation) : 0.0);
  std::printf("\n");
  return 0;
}

}  // namespace

void add_sim_memory_command(CLI::App& sim, Action& action) {
  auto a = std::make_shared<MemoryTableArgs>();
  CLI::App* c = sim.add_subcommand("memory", "Per-GPU peak memory table: unsharded, block checkpointing, "
                                             "spatial sharding, both (meta replays of the real trainer)");
  c->add_option("--model", a->train.model, "Model preset or JSON model file")->capture_default_str();
  c->add_option("--inputs", a->inputs, "Comma-separated image sizes CxHxW")->capture_default_str();
  c->add_option("--batch", a->train.batch, "Global batch size")->capture_default_str();
  c->add_option("--sp", a->sp, "Spatial shards for the sharded columns")->capture_default_str();
  c->add_option("--shard", a->train.shard, "W or H")->capture_default_str();
  c->add_option("--optimizer", a->train.optimizer, "sgd or adamw")->capture_default_str();
  c->add_option("--classes", a->train.classes, "Number of classes")->capture_default_str();
  c->add_option("--device", a->device, "Device whose capacity marks OOM")->capture_default_str();
  c->add_option("--precision", a->precision,
                "bf16 or fp16: a second table in that precision (mixed precision: 16-bit activations, f32 "
                "master weights) beside the fp32 one")
      ->capture_default_str();
  c->callback([&action, a] { action = [a] { return run_memory_table(*a); }; });
}

}  // namespace tessera::tools
