// Model descriptions (ConvNeXt and RegNet families, presets or JSON) and the builder that turns
// one into the module tree every rank runs and the simulator replays.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/nn/layers.hpp"

namespace tessera::nn {

enum class Task { Classify, Segment };

/// The one description of a model. Families:
///  - "convnext": depths, dims, drop_path, layer_scale_init (stem 4×4/s4, blocks dw7×7 → LN →
///    1×1 (4×) → GELU → 1×1 → LayerScale → DropPath, downsampling LN + 2×2/s2);
///  - "regnet": depths, widths, group_width, bottleneck_ratio, se_ratio (0 = RegNetX), stem_width
///    (stem 3×3/s2 + BN + ReLU, bottleneck blocks 1×1 → 3×3 grouped (stride 2 first) → [SE] → 1×1).
struct ModelSpec {
  std::string name = "custom";
  std::string family = "convnext";
  std::vector<int> depths;
  std::vector<int> widths;
  int in_channels = 3;
  int num_classes = 10;
  Task task = Task::Classify;
  // convnext
  double drop_path = 0.0;
  double layer_scale_init = 1e-6;
  // regnet
  int stem_width = 32;
  int group_width = 8;
  double bottleneck_ratio = 1.0;
  double se_ratio = 0.0;
  // multi-camera (views > 1): each scene is `views` consecutive images of the batch, each run
  // through the backbone above (stem and stages), then GatherViews stacks a scene's features
  // along channels and a fusion head classifies the scene: conv 3×3 (views·C → fusion_dim) →
  // LayerNorm → GELU → conv 1×1 → global pool → linear. Classification only.
  int views = 1;
  int fusion_dim = 256;

  /// Throws InvalidArgument naming the offending field.
  void validate() const;
  /// Total stride of the network (32 for both families): inputs are sharded in units of it.
  int total_stride() const;
  /// JSON text of this description (the format from_json reads).
  std::string to_json() const;
};

/// Preset names: convnext-{atto,femto,pico,nano,t,s,b,l,xl} (also -tiny/-small/-base/-large/
/// -xlarge), regnetx-{200mf,400mf,800mf}, regnety-{200mf,400mf,800mf} and multicam-atto
/// (convnext-atto over 6 camera views, fusion_dim 256). Throws
/// InvalidArgument listing the presets for an unknown name.
ModelSpec model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

/// Parses a JSON model file's text: {"family": "convnext", "depths": [...], "dims": [...], ...}
/// or {"family": "regnet", "depth": 16, "w0": 48, "wa": 27.89, "wm": 2.09, "group_width": 8,
/// "se_ratio": 0.25} (the RegNet design-space parameters) or explicit "depths"/"widths". Unknown
/// or ill-typed fields are refused with an error naming the field.
ModelSpec model_from_json(const std::string& text, const std::string& origin = "model file");

/// RegNet's quantised widths and depths from its design-space parameters (Radosavovic et al.).
void regnet_widths(int depth, double w0, double wa, double wm, int group_width, double bottleneck_ratio,
                   std::vector<int>& depths, std::vector<int>& widths);

/// Builds the module tree. `checkpointing`: "none", "block" (each block recomputed in backward)
/// or "stage" (each stage). The first layer does not compute its input gradient.
std::unique_ptr<Sequential> build_model(const ModelSpec& spec, const std::string& checkpointing = "none");

/// Parameters of the model in its unsharded form (for summaries and the simulator).
std::int64_t count_parameters(Module& model);

}  // namespace tessera::nn
