// export_weights and load_model_weights: the front ends' door to weights files.
#include "tessera/run/weights.hpp"

#include <filesystem>
#include <sstream>

#include "tessera/core/error.hpp"
#include "tessera/nn/models.hpp"
#include "tessera/nn/trainer.hpp"
#include "tessera/run/resolve.hpp"

namespace tessera::run {

namespace {

/// The classes of a file's classifier (head.fc.weight, under timm's names and tessera's alike);
/// 0 without one.
int file_classes(const nn::NamedTensors& tensors) {
  for (const auto& [name, t] : tensors)
    if (name == "head.fc.weight" && t.ndim() >= 1) return static_cast<int>(t.shape()[0]);
  return 0;
}

/// The Python line that loads `path` into timm's model: strictly (every tensor must fit), or
/// with strict=False when a head timm's model lacks was left out (its classifier then stays).
std::string pytorch_line(const ExportedWeights& e) {
  if (e.timm_model.empty() || e.naming != "timm") return {};
  std::ostringstream os;
  os << "import timm, safetensors.torch; model = timm.create_model('" << e.timm_model << "'";
  if (e.num_classes > 0) os << ", num_classes=" << e.num_classes;
  os << "); model.load_state_dict(safetensors.torch.load_file('" << e.path
     << "'), strict=" << (e.left_out.empty() ? "True" : "False") << ")";
  return os.str();
}

}  // namespace

ExportedWeights export_weights(const std::string& checkpoint, const std::string& out,
                               const std::string& naming) {
  TESSERA_CHECK(naming == "timm" || naming == "tessera", "export naming '", naming,
                "': expected timm (timm's tensor names, for timm.create_model) or tessera");
  ExportedWeights e;
  e.path = out;
  e.naming = naming;
  e.timm_model = nn::export_checkpoint(checkpoint, out, naming, &e.left_out);
  // Read back: the file as a reader sees it (and proof it is whole).
  const nn::NamedTensors written = nn::read_safetensors(out);
  e.tensors = static_cast<std::int64_t>(written.size());
  e.bytes = static_cast<std::int64_t>(std::filesystem::file_size(out));
  e.num_classes = file_classes(written);
  e.pytorch = pytorch_line(e);
  return e;
}

ModelWeights load_model_weights(const std::string& path, const std::string& model,
                                const std::string& task, int classes) {
  TESSERA_CHECK(task == "classify" || task == "segment", "load_weights: task '", task,
                "': expected classify or segment");
  TESSERA_CHECK(classes == 0 || classes >= 2, "load_weights: classes ", classes,
                ": expected at least 2 (or none: the file's classifier's count)");
  nn::ModelSpec spec = load_model(model);
  spec.task = task == "classify" ? nn::Task::Classify : nn::Task::Segment;
  if (classes == 0) classes = file_classes(nn::read_safetensors(path));
  if (classes > 0) spec.num_classes = classes;
  spec.validate();
  // One rank, host memory: every tensor exists whole. The image size does not shape any weight.
  std::unique_ptr<nn::Sequential> net = nn::build_model(spec);
  nn::SetupContext ctx;
  ctx.allocator = std::make_shared<core::Allocator>("load_weights");
  const int s = spec.total_stride();
  const core::Shape image = {spec.in_channels, 4 * s, 4 * s};
  net->setup(nn::input_layout(core::DeviceMesh(), "W", spec.views, image, s), ctx);
  std::vector<nn::Parameter*> params;
  net->parameters(params);
  std::vector<std::pair<std::string, core::Tensor*>> targets;
  for (nn::Parameter* p : params) targets.emplace_back(p->name, &p->value);
  net->buffers(targets);
  ModelWeights w;
  w.report = nn::load_weights(path, spec, targets);
  for (const auto& [name, t] : targets) w.tensors.emplace_back(name, t->clone());
  return w;
}

}  // namespace tessera::run
