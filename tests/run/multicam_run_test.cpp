// The multi-camera example (examples/multicam.json) through run::train: the run layer groups the
// synthetic images into scenes, the fusion runs on its own pipeline stage, and a shuffled run of
// a multi-camera model is refused with the fix.
#include <cmath>
#include <string>

#include "support/test_utils.hpp"
#include "tessera/run/train.hpp"

using namespace tessera;
using Catch::Matchers::Contains;

namespace {

run::RunSpec example(int steps) {
  run::RunSpec s = run::RunSpec::from_json_file(
      std::string(TESSERA_TEST_DATA_DIR) + "/../../examples/multicam.json", run::RunSpec{});
  s.set("steps", std::to_string(steps));
  s.set("threads", "1");
  return s;
}

}  // namespace

TEST_CASE("the multi-camera example trains with its fusion on pipeline stage 1",
          "[run][multicam]") {
  const run::TrainSetup setup = run::resolve_train(example(2));
  REQUIRE(setup.train.model.views == 6);
  REQUIRE(setup.train.stage_starts == std::vector<int>{19});  // fusion.gather
  const run::TrainResult r = run::train(setup);
  REQUIRE(r.steps.size() == 2);
  for (const auto& ranks : r.steps) {
    REQUIRE(ranks.size() == 4);
    for (const nn::StepStats& s : ranks) {
      CHECK(std::isfinite(s.loss));
      CHECK(s.loss == ranks[0].loss);  // every rank reports the scenes' loss alike
    }
  }
}

TEST_CASE("a multi-camera run that shuffles images is refused", "[run][multicam]") {
  run::RunSpec s = example(1);
  s.set("shuffle", "true");
  REQUIRE_THAT(test::error_of([&] { run::train(run::resolve_train(s)); }),
               Contains("shuffling permutes images, not scenes; train it with --no-shuffle"));
}
