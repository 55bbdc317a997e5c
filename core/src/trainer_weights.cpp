// Trainer::init_from: a run starting from pretrained weights (timm's or a tessera export).
#include "tessera/core/error.hpp"
#include "trainer_impl.hpp"

namespace tessera::nn {

WeightReport Trainer::init_from(const std::string& path) {
  // Every parameter of the model, other pipeline stages' (meta) ones included, so every rank checks
  // the whole file and reports the same; copying into a meta tensor does nothing.
  std::vector<Parameter*> all;
  model_->parameters(all);
  std::vector<std::pair<std::string, core::Tensor*>> targets;
  for (Parameter* p : all) targets.emplace_back(p->name, &p->value);
  model_->buffers(targets);
  // Parameters are the trainer's only copy of the weights (mixed precision casts them per layer
  // call), so nothing else needs refreshing; optimizer state stays fresh.
  return load_weights(path, opt_.model, targets);
}

}  // namespace tessera::nn
