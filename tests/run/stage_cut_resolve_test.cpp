// The run layer's default pipeline cut: with a dim pp and no stage_starts, resolve_train fills in
// the simulator's balanced cut (on the cpu-host roofline), and a simulation of the same spec cuts
// the model where training does.
#include "run/tiny_spec.hpp"
#include "support/catch.hpp"
#include "tessera/run/resolve.hpp"
#include "tessera/sim/stage_cut.hpp"

using namespace tessera;

TEST_CASE(
    "resolve: pipeline stages default to the simulator's balanced cut, for training and "
    "simulation alike",
    "[run]") {
  const std::string mesh = GENERATE(std::string("pp=2"), std::string("pp=3,sp=2"));
  run::RunSpec s = runtest::tiny_spec(run::RunSpec{}, mesh, 2);
  const run::TrainSetup train = run::resolve_train(s);
  nn::TrainOptions uncut = train.train;
  uncut.stage_starts.clear();
  const std::vector<int> expected =
      sim::balanced_stage_starts(uncut, train.mesh, sim::DeviceCatalog().get("cpu-host"));
  const int pp = train.mesh.dim_size(train.mesh.dim_index("pp"));
  REQUIRE(expected.size() == static_cast<std::size_t>(pp - 1));
  REQUIRE(train.train.stage_starts == expected);

  run::RunSpec sim_spec = runtest::tiny_spec(run::RunSpec::for_simulation(), mesh, 2);
  sim_spec.topology = "dgx-a100:1";
  REQUIRE(run::resolve_sim(sim_spec).train.stage_starts == expected);

  s.stage_starts = expected.size() == 1 ? "1" : "1,2";  // given: kept as given
  REQUIRE(run::resolve_train(s).train.stage_starts ==
          (expected.size() == 1 ? std::vector<int>{1} : std::vector<int>{1, 2}));
}
