// The small models and options the training tests share (CPU, emulated device and GPU runs):
// a ConvNeXt with DropPath and LayerScale, a RegNetY with SyncBN and squeeze-excite, both sized so
// that W = 160 splits unevenly over 3 shards.
#pragma once

#include <string>

#include "tessera/nn/trainer.hpp"

namespace tessera::test {

inline nn::ModelSpec small_convnext() {
  nn::ModelSpec m;
  m.name = "test-convnext";
  m.family = "convnext";
  m.depths = {1, 1, 2, 1};
  m.widths = {8, 16, 16, 24};
  m.num_classes = 4;
  m.drop_path = 0.2;  // DropPath on: every shard of a sample must agree, or runs diverge
  m.layer_scale_init = 0.5;
  return m;
}

inline nn::ModelSpec small_regnety() {
  nn::ModelSpec m;
  m.name = "test-regnety";
  m.family = "regnet";
  m.depths = {1, 1, 2, 1};
  m.widths = {8, 16, 24, 32};
  m.stem_width = 8;
  m.group_width = 8;
  m.se_ratio = 0.25;  // RegNetY: squeeze-and-excitation in every block; BN is SyncBN
  m.num_classes = 4;
  return m;
}

inline nn::TrainOptions options(const nn::ModelSpec& m, const std::string& optimizer) {
  nn::TrainOptions o;
  o.model = m;
  o.input = {3, 32, 160};  // W = 5 units of the total stride 32: sp=3 gets 64, 64, 32
  o.batch = 4;
  o.steps = 10;
  o.seed = 3;
  o.optimizer.kind = optimizer;
  o.optimizer.lr = optimizer == "sgd" ? 0.005 : 2e-3;
  o.warmup_steps = 2;
  // The samples in index order: the float32 and 16-bit rules' margins were measured on it (with
  // shuffled epochs RegNetY's sp=2-along-H run measured 40x its float32 allowance: another
  // trajectory, not a sharding error; the float64 tests hold every order to 1e-9).
  // train_loader_test.cpp covers shuffling.
  o.loader.shuffle = false;
  return o;
}

/// The learnability setting: a narrow ConvNeXt on 3x32x64, batch 16, AdamW at 4e-3 with warmup and
/// decay, no DropPath (training_test.cpp's 100 steps, mixed_precision_test.cpp's 200).
inline nn::TrainOptions learnability_options(int steps) {
  nn::TrainOptions o = options(small_convnext(), "adamw");
  o.model.drop_path = 0;
  o.model.widths = {16, 32, 32, 48};
  o.input = {3, 32, 64};
  o.batch = 16;
  o.steps = steps;
  o.optimizer.lr = 4e-3;
  o.warmup_steps = 5;
  o.final_lr_fraction = 0.1;
  return o;
}

/// The memory tests' ConvNeXt (16-32-48-64, depths 2-2-2-2) on 3x64x512, batch 2, one step.
inline nn::TrainOptions memory_options(const std::string& checkpointing) {
  nn::TrainOptions o;
  o.model.name = "memory-convnext";
  o.model.family = "convnext";
  o.model.depths = {2, 2, 2, 2};
  o.model.widths = {16, 32, 48, 64};
  o.model.num_classes = 4;
  o.input = {3, 64, 512};
  o.batch = 2;
  o.steps = 1;
  o.loader.shuffle = false;
  o.checkpointing = checkpointing;
  return o;
}

}  // namespace tessera::test
