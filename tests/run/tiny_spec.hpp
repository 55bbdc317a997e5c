// The run layer tests' small run description: one the replay and the simulator take in
// milliseconds, so that resolve, simulate and compare tests run whole iterations.
#pragma once

#include <string>

#include "tessera/run/spec.hpp"

namespace tessera::runtest {

/// convnext-atto classifying 3x32x64 images into 12 classes, `batch` images over `mesh`, on top of
/// `base` (RunSpec{}: a training run's defaults; RunSpec::for_simulation(): a simulation's).
inline run::RunSpec tiny_spec(run::RunSpec base, const std::string& mesh, int batch) {
  base.input = "3x32x64";
  base.batch = batch;
  base.task = "classify";
  base.classes = 12;
  base.mesh = mesh;
  return base;
}

/// tests/cli_train.sh's tiny training run: convnext-mini at 3x32x128, batch 2, sp=2 (2 ranks),
/// 6 classes, one thread per rank, `steps` steps.
inline run::RunSpec tiny_train_run(int steps) {
  run::RunSpec s;
  s.set("model", std::string(TESSERA_TEST_DATA_DIR) + "/../../examples/convnext-mini.json");
  s.set("input", "3x32x128");
  s.set("batch", "2");
  s.set("mesh", "sp=2");
  s.set("classes", "6");
  s.set("threads", "1");
  s.set("steps", std::to_string(steps));
  return s;
}

}  // namespace tessera::runtest
