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

}  // namespace tessera::runtest
