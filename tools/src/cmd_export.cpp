// `tessera export CHECKPOINT --to safetensors -o OUT`: a checkpoint's weights as a safetensors
// file timm's model loads unchanged, with the line of PyTorch that loads it.
#include <cstdio>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/weights.hpp"

namespace tessera::tools {
namespace {

struct ExportArgs {
  std::string checkpoint, to = "safetensors", out, naming = "timm";
};

int run_export(const ExportArgs& a) {
  TESSERA_CHECK(
      a.to == "safetensors", "export --to '", a.to,
      "': tessera writes safetensors (what timm and PyTorch load); give --to safetensors");
  const run::ExportedWeights e = run::export_weights(a.checkpoint, a.out, a.naming);
  std::printf("wrote %s: %lld tensors (%s names), %.1f MiB, from checkpoint %s\n", e.path.c_str(),
              static_cast<long long>(e.tensors), e.naming.c_str(), double(e.bytes) / (1 << 20),
              a.checkpoint.c_str());
  if (!e.left_out.empty()) {
    std::string names;
    for (const std::string& n : e.left_out) names += (names.empty() ? "" : ", ") + n;
    std::printf("left out (timm's model has no such head; --naming tessera keeps them): %s\n",
                names.c_str());
  }
  if (e.timm_model.empty()) {
    std::printf("timm has no model of this architecture; the file keeps the names above\n");
  } else {
    std::printf(
        "timm model: %s%s\n", e.timm_model.c_str(),
        e.num_classes > 0 ? (" (num_classes=" + std::to_string(e.num_classes) + ")").c_str() : "");
    if (!e.pytorch.empty()) std::printf("load it in PyTorch:\n  %s\n", e.pytorch.c_str());
  }
  return 0;
}

}  // namespace

void add_export_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* c = app.add_subcommand(
      "export", "Write a checkpoint's weights as a safetensors file (timm's names by default)");
  c->add_option("checkpoint", a->checkpoint, "A checkpoint written by tessera train --save")
      ->required();
  c->add_option("--to", a->to, "Output format: safetensors")->capture_default_str();
  c->add_option("-o,--output", a->out, "The file to write (e.g. convnext_atto.safetensors)")
      ->required();
  c->add_option("--naming", a->naming,
                "Tensor names: timm (timm.create_model(...).load_state_dict takes the file) or "
                "tessera (tessera's own, for --init-from)")
      ->capture_default_str();
  c->callback([&action, a] { action = [a] { return run_export(*a); }; });
}

}  // namespace tessera::tools
