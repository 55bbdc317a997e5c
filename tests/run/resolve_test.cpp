// resolve_train and resolve_sim on run descriptions: the mesh, the devices a training run computes
// on and the device model a simulation takes, dtype and precision, a calibration file applied to
// the catalog, the topology and the engine, and a mesh larger than its topology refused with the
// numbers and the fix. (spec_test.cpp checks that every field reaches its option.)
#include <filesystem>
#include <string>

#include <unistd.h>

#include "run/tiny_spec.hpp"
#include "sim/sim_test_util.hpp"  // error_of, lacks
#include "support/catch.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/resolve.hpp"
#include "tessera/sim/calibration.hpp"

using namespace tessera;
using run::RunSpec;
using simtest::error_of;
using simtest::lacks;

namespace {

RunSpec small_train() { return runtest::tiny_spec(RunSpec{}, "sp=2", 2); }

/// A calibration file with figures far from the built-in cpu-host entry, removed on scope exit.
struct CalibrationFile {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("tessera-resolve-calibration-" + std::to_string(::getpid()) + ".json"))
                         .string();
  CalibrationFile() {
    sim::DeviceCatalog catalog;
    sim::Calibration c;
    c.device = catalog.get("cpu-host");
    c.device.peak_fp32_flops = 94e9;
    c.device.mem_bw_bytes_per_s = 11e9;
    c.device.shm_bw_bytes_per_s = 4e9;
    c.device.shm_latency_s = 7e-6;
    c.device.source = "resolve_test";
    c.host = "testhost";
    c.created_utc = "2026-01-01T00:00:00Z";
    c.link = {7e-6, 4e9, 8e-6, 3e9};
    c.host_overhead_s = 1.25e-6;
    c.waits = {40e-6, 16e-6};
    catalog.add(c.device);
    c.topology = sim::Topology::preset("cpu-host:2", catalog);
    sim::KernelCalibration add;
    add.rate = {0, 12e9, 0.5e-6};
    add.samples = {{1e3, 1.2e4, 1.5e-6, false}};
    c.kernels["add"] = add;
    sim::save_calibration(c, path);
  }
  ~CalibrationFile() { std::filesystem::remove(path); }
};

}  // namespace

TEST_CASE("resolve: the mesh, dtype and precision of a training run", "[run]") {
  RunSpec s = small_train();
  s.mesh = "dp=2,sp=2";
  s.precision = "bf16";
  s.threads = 3;
  s.timeout_s = 2.5;
  const run::TrainSetup t = run::resolve_train(s);
  REQUIRE(t.mesh.size() == 4);
  REQUIRE(t.mesh.to_string() == "dp=2,sp=2");
  REQUIRE(t.mesh.find_dim("sp") == 1);
  REQUIRE(t.train.dtype == core::DType::F32);  // mixed precision keeps f32 master weights
  REQUIRE(t.train.precision == *nn::parse_precision("bf16"));
  REQUIRE(t.train.precision != *nn::parse_precision("fp32"));
  REQUIRE(t.threads == 3);
  REQUIRE(t.timeout == std::chrono::milliseconds(2500));
  REQUIRE(t.backend == "local");
  // Threads left at 0: the machine's cores shared among the ranks, at least one each.
  s.threads = 0;
  REQUIRE(run::resolve_train(s).threads >= 1);
  s.precision = "fp32";
  s.dtype = "f64";
  REQUIRE(run::resolve_train(s).train.dtype == core::DType::F64);
}

TEST_CASE("resolve: a training run's device is cpu, cuda or cuda:N, and a device model is refused",
          "[run]") {
  RunSpec s = small_train();
  const run::TrainSetup cpu = run::resolve_train(s);
  REQUIRE(cpu.compute == "cpu");
  REQUIRE(cpu.train.loader.prefetch == 0);  // auto: no loader thread beside the cpu backend's
  s.device = "cuda:3";                      // parsed, not opened: resolution needs no GPU
  const run::TrainSetup gpu = run::resolve_train(s);
  REQUIRE(gpu.compute == "cuda");
  REQUIRE(gpu.device_index == 3);
  REQUIRE(gpu.train.loader.prefetch == 2);  // auto: prefetch on GPUs
  s.device = "cuda";
  REQUIRE(run::resolve_train(s).device_index == 0);

  s.device = "cuda:x";
  REQUIRE(lacks(error_of([&] { run::resolve_train(s); }), {"device 'cuda:x'", "cuda:N"}) == "");
  s.device = "h200";
  REQUIRE(lacks(error_of([&] { run::resolve_train(s); }), {"device 'h200'", "simulation"}) == "");
}

TEST_CASE("resolve: a simulation's device names a model of the catalog", "[run]") {
  RunSpec s = runtest::tiny_spec(RunSpec::for_simulation(), "sp=2", 2);
  s.device = "h200";
  s.dtype = "f64";
  const run::SimSetup h = run::resolve_sim(s);
  REQUIRE(h.engine.device == "h200");
  REQUIRE(h.catalog.get("h200").kind == "gpu");
  REQUIRE(h.train.dtype == core::DType::F64);
  REQUIRE(h.train.loader.prefetch == 2);  // auto on a GPU model
  s.device = "";                          // the topology's own devices
  REQUIRE(run::resolve_sim(s).engine.device.empty());
  s.device = "no-such-gpu";
  // The known devices are listed.
  REQUIRE(lacks(error_of([&] { run::resolve_sim(s); }), {"no-such-gpu", "h200"}) == "");
}

TEST_CASE("resolve: a calibration file reaches the catalog, the topology and the engine", "[run]") {
  const CalibrationFile file;
  RunSpec s = runtest::tiny_spec(RunSpec::for_simulation(), "sp=2", 2);
  s.topology = "cpu-host:2";
  const run::SimSetup plain = run::resolve_sim(s);
  s.calibration = file.path;
  const run::SimSetup cal = run::resolve_sim(s);
  // The built-in figures differ from the file's, so each check below can tell the two apart.
  REQUIRE(plain.catalog.get("cpu-host").peak_fp32_flops != 94e9);
  REQUIRE(plain.engine.kernel_rates.empty());
  REQUIRE(cal.catalog.get("cpu-host").peak_fp32_flops == 94e9);
  REQUIRE(cal.catalog.get("cpu-host").source == "resolve_test");
  const auto devs = cal.topology.devices();
  REQUIRE(devs.size() == 2);
  REQUIRE(cal.topology.route_bw(devs[0], devs[1]) ==
          4e9);  // the preset built on the measured links
  REQUIRE(plain.topology.route_bw(devs[0], devs[1]) != 4e9);
  REQUIRE(cal.engine.kernel_rates_device == "cpu-host");
  REQUIRE(cal.engine.kernel_rates.count("add") == 1);
  REQUIRE(cal.engine.waits.p2p_s == Approx(40e-6));  // through the file's decimal text

  s.calibration = file.path + ".missing";
  REQUIRE(lacks(error_of([&] { run::resolve_sim(s); }), {file.path + ".missing"}) == "");
}

TEST_CASE("resolve: a mesh larger than its topology is refused with the numbers and the fix",
          "[run]") {
  RunSpec s = RunSpec::for_simulation();
  s.input = "3x64x1024";
  s.mesh = "sp=16";
  s.topology = "dgx-a100";
  REQUIRE(lacks(error_of([&] { run::resolve_sim(s); }),
                {"mesh sp=16 has 16 ranks but topology 'dgx-a100' has 8 devices",
                 "choose a smaller mesh or a larger topology"}) == "");
  s.topology = "dgx-a100:2";  // two nodes: 16 devices
  REQUIRE(run::resolve_sim(s).topology.devices().size() == 16);
  s.topology = "dgx-a100";
  s.mesh = "sp=8";  // exactly the node
  REQUIRE(run::resolve_sim(s).mesh.size() == 8);
}
