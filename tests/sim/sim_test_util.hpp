// Helpers of the simulator tests: a small training run, small synthetic topologies and
// error-message checks.
#pragma once

#include <string>
#include <vector>

#include "support/catch.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/trainer.hpp"
#include "tessera/sim/topology.hpp"

namespace tessera::simtest {

/// A small model of `family` (convnext or regnet: depths 1-1-2-1, widths 16-32-48-64, 4 classes)
/// on 3x64x256 images, batch 2, one AdamW step, no checkpointing: fast to replay and to train.
inline nn::TrainOptions small_run(const std::string& family) {
  nn::TrainOptions o;
  o.model.name = "small-" + family;
  o.model.family = family;
  o.model.depths = {1, 1, 2, 1};
  o.model.widths = {16, 32, 48, 64};
  o.model.num_classes = 4;
  if (family == "regnet") {
    o.model.stem_width = 16;
    o.model.group_width = 8;
    o.model.se_ratio = 0.25;
  }
  o.input = {3, 64, 256};  // 2 x 8 blocks of the model's stride 32
  o.batch = 2;
  o.steps = 1;
  o.optimizer.kind = "adamw";
  return o;
}

/// `p` GPUs (a100-80gb) on one switch: each GPU–switch link has `bw` per direction and half of
/// `alpha_ps` latency, so every GPU-to-GPU route has bandwidth bw and latency alpha_ps.
inline sim::Topology star(int p, double bw, sim::Picos alpha_ps) {
  sim::Topology t;
  t.name = "star" + std::to_string(p);
  const int sw = t.add_node({"switch", sim::NodeKind::NvSwitch, "", 0});
  for (int i = 0; i < p; ++i) {
    const int g = t.add_node({"gpu" + std::to_string(i), sim::NodeKind::Gpu, "a100-80gb", 0});
    t.add_link(g, sw, bw, alpha_ps / 2, "nvlink");
  }
  return t;
}

/// The message of the tessera::Error that `f` throws, "(no error)" when it returns, or
/// "(other exception) ..." for anything else.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(other exception) ") + e.what();
  }
  return "(no error)";
}

/// "" when `message` contains every needle, else a line saying which is missing (so that
/// REQUIRE(lacks(...) == "") prints the whole message when it fails).
inline std::string lacks(const std::string& message, const std::vector<std::string>& needles) {
  for (const auto& n : needles)
    if (message.find(n) == std::string::npos) return "message \"" + message + "\" lacks \"" + n + "\"";
  return "";
}

}  // namespace tessera::simtest
