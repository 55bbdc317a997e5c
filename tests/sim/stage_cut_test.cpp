// The simulator's stage cut (stage_cut.hpp): ops summed into the unit that owns their layer, the
// cut balanced over those times, the pipeline dimension removed before the replay.
#include <algorithm>
#include <numeric>

#include "sim_test_util.hpp"
#include "support/catch.hpp"
#include "tessera/nn/pipeline.hpp"
#include "tessera/sim/stage_cut.hpp"

using namespace tessera;

namespace {

sim::ProgramOp kernel(const std::string& layer, double flops) {
  sim::ProgramOp op;
  op.name = "conv2d_forward";
  op.op = compute::OpKind::Conv2dForward;
  op.layer = layer;
  op.flops = flops;
  op.bytes = 1;
  return op;
}

// The most expensive stage of the cut `starts` of `costs`.
double slowest_stage(const std::vector<double>& costs, const std::vector<int>& starts) {
  std::vector<int> cuts = starts;
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(static_cast<int>(costs.size()));
  double most = 0;
  for (std::size_t s = 0; s + 1 < cuts.size(); ++s)
    most =
        std::max(most, std::accumulate(costs.begin() + cuts[s], costs.begin() + cuts[s + 1], 0.0));
  return most;
}

}  // namespace

TEST_CASE("unit_times sums each op into the unit whose name prefixes its layer at a dot",
          "[sim][stage_cut]") {
  sim::RankReplay r;
  r.units = {"stem", "stages.0.blocks.1", "stages.0.blocks.10", "head"};
  r.program = {kernel("stem", 1e9),
               kernel("stages.0.blocks.1.dwconv", 2e9),
               kernel("stages.0.blocks.10.pwconv1", 4e9),
               kernel("stages.0.blocks.10", 8e9),
               kernel("loss", 16e9),
               kernel("optimizer", 32e9),
               kernel("head.fc", 64e9)};
  sim::ProgramOp halo;
  halo.kind = sim::ProgramOp::Kind::P2P;
  halo.layer = "stem";
  r.program.push_back(halo);  // communication: no kernel time
  const sim::DeviceCatalog catalog;
  const sim::DeviceSpec& dev = catalog.get("a100-80gb");
  sim::EngineOptions eo;
  eo.launch_overhead = false;
  const std::vector<double> t = sim::unit_times(r, dev, eo);
  auto secs = [&](double flops) {
    return double(sim::kernel_time_ps(kernel("x", flops), dev, eo)) / double(sim::kPicosPerSecond);
  };
  REQUIRE(t.size() == 4);
  CHECK(t[0] == secs(1e9));
  CHECK(t[1] == secs(2e9));  // not blocks.10's ops, though "stages.0.blocks.1" prefixes them
  CHECK(t[2] == secs(4e9) + secs(8e9));
  CHECK(t[3] == secs(64e9));
}

TEST_CASE("mesh_without_pp drops the pipeline dimension only", "[sim][stage_cut]") {
  CHECK(sim::mesh_without_pp(core::DeviceMesh::parse("dp=2,pp=2,sp=2")).to_string() ==
        core::DeviceMesh::parse("dp=2,sp=2").to_string());
  CHECK(sim::mesh_without_pp(core::DeviceMesh::parse("pp=4")).size() == 1);
  CHECK(sim::mesh_without_pp(core::DeviceMesh::parse("dp=2,sp=2")) ==
        core::DeviceMesh::parse("dp=2,sp=2"));
}

TEST_CASE("balanced_stage_starts cuts the replayed unit times evenly", "[sim][stage_cut]") {
  const std::string family = GENERATE(std::string("convnext"), std::string("regnet"));
  nn::TrainOptions o = simtest::small_run(family);
  o.stage_starts = {1};  // ignored: the cut is the simulator's
  const sim::DeviceCatalog catalog;
  const sim::DeviceSpec& dev = catalog.get("a100-80gb");
  nn::TrainOptions no_pp = o;
  no_pp.stage_starts.clear();
  const sim::RankReplay whole = sim::replay_rank(no_pp, core::DeviceMesh::parse("sp=2"), 0);
  const std::vector<double> costs = sim::unit_times(whole, dev);
  REQUIRE(costs.size() == whole.units.size());
  REQUIRE(costs.size() >= 4);
  for (double c : costs) REQUIRE(c > 0);  // every unit runs kernels, forward and backward

  const std::vector<int> two =
      sim::balanced_stage_starts(o, core::DeviceMesh::parse("pp=2,sp=2"), dev);
  REQUIRE(two.size() == 1);
  // No other cut in two has a cheaper slowest stage.
  for (int s = 1; s < static_cast<int>(costs.size()); ++s)
    CHECK(slowest_stage(costs, two) <= slowest_stage(costs, {s}));
  const std::vector<int> three =
      sim::balanced_stage_starts(o, core::DeviceMesh::parse("dp=1,pp=3,sp=2"), dev);
  CHECK(three == nn::balanced_stage_starts(costs, 3));
  CHECK(sim::balanced_stage_starts(o, core::DeviceMesh::parse("dp=2,sp=2"), dev).empty());
  CHECK(sim::balanced_stage_starts(o, core::DeviceMesh::parse("pp=1,sp=2"), dev).empty());
  const std::string too_many = simtest::error_of([&] {
    sim::balanced_stage_starts(o, core::DeviceMesh({static_cast<int>(costs.size()) + 1}, {"pp"}),
                               dev);
  });
  CHECK(too_many.find("units") != std::string::npos);
}
