// run::simulate on a small run description: the folded simulation gives every rank's figures of
// simulating every rank, the JSON that `tessera sim run --json`, Python and the studio print has
// its fields with the result's values, each device's memory is the replay's (sim's memory model),
// and a trace written through the spec carries the run and the build in its metadata.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include <unistd.h>

#include "run/tiny_spec.hpp"
#include "support/catch.hpp"
#include "tessera/core/trace.hpp"
#include "tessera/core/version.hpp"
#include "tessera/run/simulate.hpp"
#include "tessera/sim/replay.hpp"
#include "tessera/sim/units.hpp"

using namespace tessera;
using run::RunSpec;
using Json = nlohmann::json;

namespace {

/// convnext-atto on 3x32x64 over dp=2,sp=2 of one DGX A100 node: two replicas of two shards, so
/// folding has ranks to fold; a few milliseconds to simulate.
RunSpec small_sim() {
  RunSpec s = runtest::tiny_spec(RunSpec::for_simulation(), "dp=2,sp=2", 2);
  s.topology = "dgx-a100";
  return s;
}

}  // namespace

TEST_CASE("simulate: the folded simulation gives the figures of simulating every rank", "[run]") {
  const run::SimSetup setup = run::resolve_sim(small_sim());
  const run::SimRun folded = run::simulate(setup, /*every_rank=*/false, /*keep_trace=*/false);
  const run::SimRun every = run::simulate(setup, /*every_rank=*/true, /*keep_trace=*/false);
  REQUIRE(every.result.simulated_ranks == 4);
  REQUIRE(folded.result.simulated_ranks < every.result.simulated_ranks);  // something was folded
  REQUIRE(folded.result.iteration_ps > 0);
  REQUIRE(folded.result.iteration_ps == every.result.iteration_ps);
  REQUIRE(folded.result.devices.size() == every.result.devices.size());
  for (std::size_t r = 0; r < every.result.devices.size(); ++r) {
    INFO("rank " << r);
    const sim::DeviceResult& f = folded.result.devices[r];
    const sim::DeviceResult& e = every.result.devices[r];
    REQUIRE(f.rank == e.rank);
    REQUIRE(f.device == e.device);
    REQUIRE(f.end_ps == e.end_ps);
    REQUIRE(f.compute_busy_ps == e.compute_busy_ps);
    REQUIRE(f.comm_busy_ps == e.comm_busy_ps);
    REQUIRE(f.memory.peak_total == e.memory.peak_total);
  }
  REQUIRE(folded.result.trace.empty());  // keep_trace false: no timeline kept
}

TEST_CASE("simulate: to_json has the fields the CLI prints, with the result's values", "[run]") {
  const run::SimRun run = run::simulate(small_sim());
  const Json j = Json::parse(run.to_json());
  REQUIRE(j.at("model") == "convnext-atto");
  REQUIRE(j.at("mesh") == "dp=2,sp=2");
  REQUIRE(j.at("topology") == run.setup.topology.name);
  REQUIRE(j.at("iteration_ps").get<sim::Picos>() == run.result.iteration_ps);
  REQUIRE(
      j.at("iteration_time_s").get<double>() ==
      Approx(static_cast<double>(run.result.iteration_ps) / sim::kPicosPerSecond).epsilon(1e-12));
  REQUIRE(j.at("simulated_ranks") == run.result.simulated_ranks);
  const Json& devices = j.at("devices");
  REQUIRE(devices.size() == 4);
  for (std::size_t r = 0; r < devices.size(); ++r) {
    INFO("rank " << r);
    const Json& d = devices[r];
    const sim::DeviceResult& want = run.result.devices[r];
    for (const char* key : {"rank", "coords", "device", "simulated_as", "peak_memory_bytes",
                            "memory_bytes", "capacity_bytes", "compute_busy_s", "comm_busy_s"})
      REQUIRE(d.contains(key));
    REQUIRE(d.at("rank") == int(r));
    REQUIRE(d.at("coords") == run.setup.mesh.coords_of(int(r)));
    REQUIRE(d.at("device") == want.device);
    REQUIRE(d.at("peak_memory_bytes").get<std::size_t>() == want.memory.peak_total);
    REQUIRE(d.at("memory_bytes").size() == std::size_t(core::kNumMemCategories));
    REQUIRE(d.at("capacity_bytes").get<double>() ==
            run.setup.catalog.get(want.device).capacity_bytes);
    REQUIRE(d.at("compute_busy_s").get<double>() > 0);
  }
  REQUIRE(j.at("links").is_array());
  REQUIRE_FALSE(j.at("links").empty());  // halo exchanges and the gradient all-reduce cross links
  for (const Json& l : j.at("links"))
    for (const char* key : {"from", "to", "kind", "bytes", "utilisation"}) REQUIRE(l.contains(key));
}

TEST_CASE("simulate: each device's memory is its rank's replay (sim's memory model)", "[run]") {
  const run::SimRun run = run::simulate(small_sim());
  const Json devices = Json::parse(run.to_json()).at("devices");
  const run::SimSetup& s = run.setup;
  for (int r = 0; r < s.mesh.size(); ++r) {
    INFO("rank " << r);
    const sim::RankReplay replay = sim::replay_rank(s.train, s.mesh, r, s.mesh_comm);
    REQUIRE(replay.memory.peak_total > 0);
    REQUIRE(devices[r].at("peak_memory_bytes").get<std::size_t>() == replay.memory.peak_total);
    for (int c = 0; c < core::kNumMemCategories; ++c) {
      const std::string name(core::mem_category_name(static_cast<core::MemCategory>(c)));
      REQUIRE(devices[r].at("memory_bytes").at(name).get<std::size_t>() == replay.memory.peak[c]);
    }
  }
}

TEST_CASE("simulate: a spec's trace file names the run, the front end and the build", "[run]") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tessera-simulate-test-" + std::to_string(::getpid()) + ".json"))
                               .string();
  RunSpec s = small_sim();
  s.trace = path;
  const run::SimRun run = run::simulate(s, false, "simulate_test");
  REQUIRE(run.result.simulated_ranks == 4);  // a trace simulates every rank: a lane per device
  const core::ChromeTrace t = core::read_chrome_trace_file(path);
  std::filesystem::remove(path);
  REQUIRE(t.other_value("source") == "simulate_test");
  REQUIRE(t.other_value("model") == "convnext-atto");
  REQUIRE(t.other_value("mesh") == "dp=2,sp=2");
  REQUIRE(t.other_value("input") == core::shape_str(core::Shape{3, 32, 64}));
  REQUIRE(t.other_value("tessera_version") == std::string(core::version()));
  REQUIRE(t.other_value("build") == core::build_description());
  REQUIRE(t.process_names.size() == 4);
  REQUIRE(t.events.size() == run.result.trace.size());
}
