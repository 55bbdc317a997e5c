// `tessera sim`: the simulator's command line — `--list` prints the topology presets and devices,
// `collective` simulates one collective alone; `run` and `memory` live in cmd_sim_run.cpp and
// cmd_sim_memory.cpp.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/sim/collectives.hpp"
#include "tessera/sim/units.hpp"

namespace tessera::tools {

namespace {

struct CollectiveArgs {
  std::string op = "all_reduce";
  std::string bytes = "64MiB";
  std::string topology = "dgx-a100";
  std::string algorithm = "auto";
  int ranks = 0;
  bool json = false;
};

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

int run_collective(const CollectiveArgs& a) {
  const sim::CollectiveOp op = sim::parse_collective_op(a.op);
  const sim::Algorithm algo = sim::parse_algorithm(a.algorithm);
  const std::int64_t bytes = sim::parse_byte_size(a.bytes);
  const sim::Topology topo = run::load_topology(a.topology);
  std::vector<int> group = topo.devices();
  TESSERA_CHECK(a.ranks >= 0 && a.ranks <= static_cast<int>(group.size()), "--ranks ", a.ranks,
                ": topology '", topo.name, "' has ", group.size(),
                " devices; give 1..", group.size(), " (or omit it to use them all)");
  if (a.ranks > 0) group.resize(a.ranks);
  const sim::CollectiveResult r = sim::simulate_collective(topo, op, algo, group, bytes);
  const double seconds = static_cast<double>(r.time_ps) / sim::kPicosPerSecond;
  if (a.json) {
    std::printf(
        "{\"op\": %s, \"bytes\": %lld, \"topology\": %s, \"ranks\": %zu, \"algorithm\": %s, "
        "\"time_s\": %.9g, \"time_ps\": %lld, \"algbw_GBps\": %.6g, \"busbw_GBps\": %.6g}\n",
        json_string(a.op).c_str(), static_cast<long long>(bytes), json_string(topo.name).c_str(),
        group.size(), json_string(sim::algorithm_name(r.algorithm)).c_str(), seconds,
        static_cast<long long>(r.time_ps), r.algbw_GBps, r.busbw_GBps);
    return 0;
  }
  std::printf("%s of %s over %zu ranks of %s, algorithm %s%s\n", a.op.c_str(),
              sim::format_bytes(bytes).c_str(), group.size(), topo.name.c_str(),
              sim::algorithm_name(r.algorithm).c_str(), algo == sim::Algorithm::Auto ? " (auto)" : "");
  std::printf("  time    %s\n  algbw   %.2f GB/s\n  busbw   %.2f GB/s   (GB = 1e9 bytes)\n",
              sim::format_duration(r.time_ps).c_str(), r.algbw_GBps, r.busbw_GBps);
  return 0;
}

int run_list() {
  std::printf("topology presets:\n");
  for (const auto& name : sim::Topology::preset_names()) {
    if (name.find(':') == std::string::npos) {
      std::printf("  %-22s %s\n", name.c_str(), sim::Topology::preset(name).describe().c_str());
    } else if (name.find("fat-tree") != std::string::npos) {
      std::printf("  %-22s N nodes, two-level InfiniBand fat tree (NICs to leaves by node)\n",
                  name.c_str());
    } else if (name.rfind("cpu-host", 0) == 0) {
      std::printf("  %-22s N ranks on this machine exchanging through shared memory\n", name.c_str());
    } else if (name.find('+') != std::string::npos) {
      std::printf("  %-22s two machine families in one job, one rail-optimised InfiniBand\n",
                  name.c_str());
    } else if (name.rfind("gb200-nvl72", 0) == 0) {
      std::printf("  %-22s N racks of 72 GPUs (one NVLink domain each), rail InfiniBand across\n",
                  name.c_str());
    } else {
      std::printf("  %-22s N nodes, rail-optimised InfiniBand (NIC i of every node on leaf i)\n",
                  name.c_str());
    }
  }
  std::printf("devices:\n");
  const sim::DeviceCatalog catalog;
  for (const auto& name : catalog.names()) {
    const sim::DeviceSpec& d = catalog.get(name);
    std::printf("  %-10s %-3s  FP32 %6.1f  TF32 %6.1f  BF16 %7.1f TFLOP/s  %7.0f GB/s  %6.1f GB\n",
                name.c_str(), d.kind.c_str(), d.peak_fp32_flops / 1e12, d.peak_tf32_flops / 1e12,
                d.peak_bf16_flops / 1e12, d.mem_bw_bytes_per_s / 1e9, d.capacity_bytes / 1e9);
  }
  return 0;
}

}  // namespace

void add_sim_command(CLI::App& app, Action& action) {
  CLI::App* sim = app.add_subcommand("sim", "Simulate collectives and training iterations");
  sim->require_subcommand(0, 1);
  auto list = std::make_shared<bool>(false);
  sim->add_flag("--list", *list, "List the topology presets and the device catalog");

  auto args = std::make_shared<CollectiveArgs>();
  CLI::App* c = sim->add_subcommand("collective", "Simulate one collective on an idle network");
  c->add_option("--op", args->op, "all_reduce, all_gather, reduce_scatter, broadcast, all_to_all")
      ->capture_default_str();
  c->add_option("--bytes", args->bytes, "Per-rank buffer: 64MiB, 1G, 4096 (K/M/G ×1000, KiB/MiB/GiB ×1024)")
      ->capture_default_str();
  c->add_option("--topology", args->topology, "A preset (tessera sim --list) or a topology JSON file")
      ->capture_default_str();
  c->add_option("--algorithm", args->algorithm,
                "ring, tree, hier, pairwise, direct or auto (fastest)")
      ->capture_default_str();
  c->add_option("--ranks", args->ranks, "Use the first N devices (default: all)");
  c->add_flag("--json", args->json, "Print one JSON object (time_s, algbw_GBps, busbw_GBps, ...)");
  c->callback([&action, args] { action = [args] { return run_collective(*args); }; });
  add_sim_run_command(*sim, action);
  add_sim_memory_command(*sim, action);
  add_sim_compare_command(*sim, action);

  sim->callback([&action, sim, list] {
    if (*list) {
      action = [] { return run_list(); };
    } else if (sim->get_subcommands().empty()) {
      action = [sim] {
        std::cerr << sim->help();
        return 1;
      };
    }
  });
}

}  // namespace tessera::tools
