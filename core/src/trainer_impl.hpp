// The Trainer's internal records, shared by trainer.cpp and trainer_pipeline.cpp.
#pragma once

#include <memory>
#include <vector>

#include "tessera/nn/trainer.hpp"

namespace tessera::nn {

struct Trainer::Bucket {
  std::vector<int> dims;
  core::Tensor flat;
  std::vector<Parameter*> params;
  std::int64_t elems = 0;
  int pending = 0;
  comm::WorkPtr work;
  core::Tensor
      wire;  ///< the bucket rounded to grad_reduce's dtype while it is reduced (else undefined)
  bool reduced = false;  ///< its group has more than one rank (else nothing travels)
  std::unique_ptr<TopKCompressor> topk;  ///< with grad_compression topk, for a reduced bucket
};

/// One micro-batch between its forward and its backward on this stage.
struct Trainer::Micro {
  core::Tensor labels;  ///< last stage: this micro-batch's labels (until its loss is computed)
  core::Tensor dloss;   ///< last stage: the gradient of the loss w.r.t. the logits
  std::vector<SavedState> saved;  ///< with several stages: each unit's saved tensors
};

/// A send to another stage in flight: its buffer lives until the send completes.
struct Trainer::Pending {
  comm::WorkPtr work;
  core::Tensor buffer;
};

/// Pipeline messages between adjacent stages, apart from the halo exchanges' tag: activations
/// travel forward, their gradients backward, each in order per pair of ranks.
inline constexpr int kStageActivationTag = 0x5e10;
inline constexpr int kStageGradientTag = 0x5e11;

}  // namespace tessera::nn
