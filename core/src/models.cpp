// Model presets and the builder: ConvNeXt and RegNet as module trees.
#include "tessera/nn/models.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "tessera/core/error.hpp"

namespace tessera::nn {

namespace {

ModelSpec convnext(std::string name, std::vector<int> depths, std::vector<int> dims, double drop_path) {
  ModelSpec s;
  s.name = std::move(name);
  s.family = "convnext";
  s.depths = std::move(depths);
  s.widths = std::move(dims);
  s.drop_path = drop_path;
  return s;
}

ModelSpec regnet(std::string name, int depth, double w0, double wa, double wm, int g, double se) {
  ModelSpec s;
  s.name = std::move(name);
  s.family = "regnet";
  s.group_width = g;
  s.se_ratio = se;
  regnet_widths(depth, w0, wa, wm, g, 1.0, s.depths, s.widths);
  return s;
}

const std::map<std::string, ModelSpec>& presets() {
  static const std::map<std::string, ModelSpec> p = [] {
    std::map<std::string, ModelSpec> m;
    auto add = [&](std::initializer_list<const char*> names, const ModelSpec& s) {
      for (const char* n : names) {
        ModelSpec c = s;
        c.name = n;
        m.emplace(n, c);
      }
    };
    // ConvNeXt (Liu et al. 2022; atto..nano from timm).
    add({"convnext-atto"}, convnext("", {2, 2, 6, 2}, {40, 80, 160, 320}, 0.0));
    add({"convnext-femto"}, convnext("", {2, 2, 6, 2}, {48, 96, 192, 384}, 0.0));
    add({"convnext-pico"}, convnext("", {2, 2, 6, 2}, {64, 128, 256, 512}, 0.0));
    add({"convnext-nano"}, convnext("", {2, 2, 8, 2}, {80, 160, 320, 640}, 0.0));
    add({"convnext-t", "convnext-tiny"}, convnext("", {3, 3, 9, 3}, {96, 192, 384, 768}, 0.1));
    add({"convnext-s", "convnext-small"}, convnext("", {3, 3, 27, 3}, {96, 192, 384, 768}, 0.4));
    add({"convnext-b", "convnext-base"}, convnext("", {3, 3, 27, 3}, {128, 256, 512, 1024}, 0.5));
    add({"convnext-l", "convnext-large"}, convnext("", {3, 3, 27, 3}, {192, 384, 768, 1536}, 0.5));
    add({"convnext-xl", "convnext-xlarge"}, convnext("", {3, 3, 27, 3}, {256, 512, 1024, 2048}, 0.5));
    // RegNet (Radosavovic et al. 2020; design-space parameters as in pycls / torchvision).
    add({"regnetx-200mf"}, regnet("", 13, 24, 36.44, 2.49, 8, 0.0));
    add({"regnetx-400mf"}, regnet("", 22, 24, 24.48, 2.54, 16, 0.0));
    add({"regnetx-800mf"}, regnet("", 16, 56, 35.73, 2.28, 16, 0.0));
    add({"regnety-200mf"}, regnet("", 13, 24, 36.44, 2.49, 8, 0.25));
    add({"regnety-400mf"}, regnet("", 16, 48, 27.89, 2.09, 8, 0.25));
    add({"regnety-800mf"}, regnet("", 14, 56, 38.84, 2.4, 16, 0.25));
    // A multi-camera scene classifier: six views through one convnext-atto backbone.
    ModelSpec multicam = convnext("", {2, 2, 6, 2}, {40, 80, 160, 320}, 0.0);
    multicam.views = 6;
    add({"multicam-atto"}, multicam);
    return m;
  }();
  return p;
}

// Bounds of the RegNet design space that keep every width an int.
constexpr int kMaxRegnetDepth = 1000;
constexpr int kMaxWidth = 1 << 20;
constexpr std::size_t kMaxStages = 16;

int make_divisible(double v, int divisor) {
  int nv = std::max(divisor, static_cast<int>(v + divisor / 2.0) / divisor * divisor);
  if (nv < 0.9 * v) nv += divisor;
  return nv;
}

}  // namespace

void regnet_widths(int depth, double w0, double wa, double wm, int group_width, double b,
                   std::vector<int>& depths, std::vector<int>& widths) {
  // The bounds keep every width an int (and the loop short); RegNets use depth < 30, w0, wa < 1000.
  TESSERA_CHECK(depth > 0 && depth <= kMaxRegnetDepth && w0 > 0 && w0 <= kMaxWidth && wa >= 0 && wa <= kMaxWidth &&
                    wm > 1 && wm <= 16 && static_cast<int>(w0) % 8 == 0,
                "regnet: invalid design parameters depth ", depth, ", w0 ", w0, ", wa ", wa, ", wm ", wm,
                " (need depth in [1, ", kMaxRegnetDepth, "], w0 in (0, ", kMaxWidth, "] and a multiple of 8, wa in [0, ",
                kMaxWidth, "], wm in (1, 16])");
  TESSERA_CHECK(group_width > 0, "regnet: group_width ", group_width, " must be positive");
  TESSERA_CHECK(b > 0 && b <= 16, "regnet: bottleneck_ratio ", b, " must be in (0, 16]");
  std::vector<int> block_widths;
  for (int i = 0; i < depth; ++i) {
    const double cont = i * wa + w0;
    const double cap = std::round(std::log(cont / w0) / std::log(wm));
    const double w = std::round(w0 * std::pow(wm, cap) / 8.0) * 8;
    TESSERA_CHECK(w <= kMaxWidth, "regnet: block ", i, " would be ", w, " channels wide (at most ", kMaxWidth,
                  "); lower w0, wa or wm");
    block_widths.push_back(static_cast<int>(w));
  }
  depths.clear();
  widths.clear();
  for (int w : block_widths) {
    if (widths.empty() || widths.back() != w) {
      widths.push_back(w);
      depths.push_back(0);
    }
    ++depths.back();
  }
  for (auto& w : widths) {  // make bottleneck widths divisible by the group width
    const int wb = static_cast<int>(w * b);
    TESSERA_CHECK(wb > 0, "regnet: width ", w, " times bottleneck_ratio ", b, " is below one channel");
    const int g = std::min(group_width, wb);
    w = static_cast<int>(make_divisible(wb, g) / b);
  }
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> out;
  for (auto& [n, s] : presets()) out.push_back(n);
  return out;
}

ModelSpec model_preset(const std::string& name) {
  auto it = presets().find(name);
  if (it == presets().end()) {
    std::string all;
    for (auto& [n, s] : presets()) all += (all.empty() ? "" : ", ") + n;
    throw InvalidArgument("unknown model '" + name + "'; presets: " + all + " (or a JSON model file)");
  }
  return it->second;
}

void ModelSpec::validate() const {
  TESSERA_CHECK(family == "convnext" || family == "regnet", "model '", name, "': field 'family' is '",
                family, "'; expected \"convnext\" or \"regnet\"");
  TESSERA_CHECK(!depths.empty() && depths.size() == widths.size(), "model '", name, "': fields 'depths' (",
                depths.size(), " entries) and '", family == "convnext" ? "dims" : "widths", "' (", widths.size(),
                " entries) must be non-empty and of equal length");
  // (found by fuzz_model_json: a RegNet rule of 36 stages shifted the total stride past an int)
  TESSERA_CHECK(depths.size() <= kMaxStages, "model '", name, "': ", depths.size(),
                " stages; at most ", kMaxStages, " (each halves the resolution, so the total stride "
                "would be 2^", depths.size() + 1, "); check 'depth', 'wa' and 'wm' of a RegNet rule");
  if (family == "convnext")
    TESSERA_CHECK(depths.size() == 4, "model '", name, "': field 'depths' needs 4 stages for ConvNeXt, got ",
                  depths.size());
  for (int d : depths) TESSERA_CHECK(d > 0, "model '", name, "': field 'depths' has a non-positive entry ", d);
  for (int w : widths) TESSERA_CHECK(w > 0, "model '", name, "': field '", family == "convnext" ? "dims" : "widths",
                                     "' has a non-positive entry ", w);
  TESSERA_CHECK(in_channels > 0, "model '", name, "': field 'in_channels' must be positive");
  TESSERA_CHECK(num_classes > 1, "model '", name, "': field 'num_classes' must be at least 2");
  TESSERA_CHECK(drop_path >= 0 && drop_path < 1, "model '", name, "': field 'drop_path' ", drop_path,
                " must be in [0, 1)");
  TESSERA_CHECK(se_ratio >= 0 && se_ratio < 1, "model '", name, "': field 'se_ratio' must be in [0, 1)");
  if (family == "regnet") {
    TESSERA_CHECK(group_width > 0, "model '", name, "': field 'group_width' must be positive");
    TESSERA_CHECK(bottleneck_ratio > 0 && bottleneck_ratio <= 16, "model '", name, "': field 'bottleneck_ratio' ",
                  bottleneck_ratio, " must be in (0, 16]");
    for (int w : widths) {
      // (found by fuzz_model_json: a ratio of 0 divided by zero here; a huge width overflowed the int)
      const double inner = w * bottleneck_ratio;
      TESSERA_CHECK(inner >= 1 && inner <= kMaxWidth, "model '", name, "': width ", w, " times field "
                    "'bottleneck_ratio' ", bottleneck_ratio, " gives ", inner, " channels; it must be in [1, ", kMaxWidth, "]");
      const int wb = static_cast<int>(inner);
      TESSERA_CHECK(wb % std::min(group_width, wb) == 0, "model '", name, "': width ", w,
                    " is not divisible by field 'group_width' ", group_width);
    }
    TESSERA_CHECK(stem_width > 0, "model '", name, "': field 'stem_width' must be positive");
  }
  TESSERA_CHECK(views >= 1, "model '", name, "': field 'views' ", views, " must be at least 1");
  if (views > 1) {
    TESSERA_CHECK(task == Task::Classify, "model '", name, "': ", views,
                  " camera views (field 'views') need task classify; a multi-camera model "
                  "classifies scenes");
    TESSERA_CHECK(fusion_dim > 0 && fusion_dim <= kMaxWidth, "model '", name,
                  "': field 'fusion_dim' ", fusion_dim, " must be in [1, ", kMaxWidth, "]");
    TESSERA_CHECK(std::int64_t(views) * widths.back() <= kMaxWidth, "model '", name, "': ", views,
                  " views of ", widths.back(), " channels are too many to stack (at most ",
                  kMaxWidth, ")");
  }
}

int ModelSpec::total_stride() const {
  return family == "convnext" ? 4 << (depths.size() - 1) : 2 << depths.size();
}

namespace {

ModulePtr convnext_block(const std::string& name, int dim, double drop_path, double ls_init) {
  auto body = std::make_unique<Sequential>(name);
  body->add(std::make_unique<Conv2d>(name + ".dwconv", ConvSpec::square(dim, dim, 7, 1, 3, 1, dim, true)));
  body->add(std::make_unique<LayerNorm>(name + ".norm", dim));
  body->add(std::make_unique<Conv2d>(name + ".pwconv1", ConvSpec::square(dim, 4 * dim, 1)));
  body->add(std::make_unique<ActivationLayer>(name + ".act", compute::Activation::Gelu));
  body->add(std::make_unique<Conv2d>(name + ".pwconv2", ConvSpec::square(4 * dim, dim, 1)));
  if (ls_init > 0) body->add(std::make_unique<LayerScale>(name + ".gamma", dim, ls_init));
  if (drop_path > 0) body->add(std::make_unique<DropPath>(name + ".drop_path", drop_path));
  return std::make_unique<Residual>(name, std::move(body));
}

ModulePtr maybe_checkpoint(ModulePtr m, bool on) {
  return on ? std::make_unique<Checkpoint>(std::move(m)) : std::move(m);
}

/// The multi-camera fusion head, each layer a unit of its own so a pipeline stage can begin at
/// the gather (or at any layer up to the pool).
void add_fusion_head(Sequential& net, const ModelSpec& s, int width) {
  const int stacked = s.views * width, f = s.fusion_dim;
  net.add(std::make_unique<GatherViews>("fusion.gather", s.views));
  net.add(std::make_unique<Conv2d>("fusion.conv1", ConvSpec::square(stacked, f, 3, 1, 1)));
  net.add(std::make_unique<LayerNorm>("fusion.norm", f));
  net.add(std::make_unique<ActivationLayer>("fusion.act", compute::Activation::Gelu));
  net.add(std::make_unique<Conv2d>("fusion.conv2", ConvSpec::square(f, f, 1)));
  net.add(std::make_unique<GlobalAvgPool>("fusion.pool"));
  net.add(std::make_unique<Linear>("fusion.fc", f, s.num_classes, true, s.family == "convnext"));
}

void add_head(Sequential& net, const ModelSpec& s, int width, bool norm) {
  if (s.views > 1) {
    add_fusion_head(net, s, width);
  } else if (s.task == Task::Classify) {
    net.add(std::make_unique<GlobalAvgPool>("head.pool"));
    if (norm) net.add(std::make_unique<LayerNorm>("head.norm", width));
    net.add(std::make_unique<Linear>("head.fc", width, s.num_classes, true, s.family == "convnext"));
  } else {
    if (norm) net.add(std::make_unique<LayerNorm>("head.norm", width));
    net.add(std::make_unique<Conv2d>("head.classifier", ConvSpec::square(width, s.num_classes, 1)));
    net.add(std::make_unique<UpsampleNearest>("head.upsample", s.total_stride()));
  }
}

std::unique_ptr<Sequential> build_convnext(const ModelSpec& s, bool block_ckpt, bool stage_ckpt) {
  auto net = std::make_unique<Sequential>("");
  auto stem = std::make_unique<Sequential>("stem");
  auto stem_conv = std::make_unique<Conv2d>("stem.conv", ConvSpec::square(s.in_channels, s.widths[0], 4, 4, 0));
  stem_conv->set_input_grad(false);
  stem->add(std::move(stem_conv));
  stem->add(std::make_unique<LayerNorm>("stem.norm", s.widths[0]));
  stem->set_input_grad(false);
  net->add(std::move(stem));
  int total = 0;
  for (int d : s.depths) total += d;
  int block = 0;
  for (std::size_t i = 0; i < s.depths.size(); ++i) {
    const std::string sn = "stages." + std::to_string(i);
    auto stage = std::make_unique<Sequential>(sn);
    if (i > 0) {
      stage->add(std::make_unique<LayerNorm>(sn + ".downsample.norm", s.widths[i - 1]));
      stage->add(std::make_unique<Conv2d>(sn + ".downsample.conv", ConvSpec::square(s.widths[i - 1], s.widths[i], 2, 2, 0)));
    }
    for (int b = 0; b < s.depths[i]; ++b, ++block) {
      const double dp = total > 1 ? s.drop_path * block / (total - 1) : 0.0;
      stage->add(maybe_checkpoint(convnext_block(sn + ".blocks." + std::to_string(b), s.widths[i], dp, s.layer_scale_init),
                                  block_ckpt));
    }
    net->add(maybe_checkpoint(std::move(stage), stage_ckpt));
  }
  add_head(*net, s, s.widths.back(), true);
  return net;
}

ModulePtr regnet_block(const std::string& name, int w_in, int w_out, int stride, const ModelSpec& s) {
  const int wb = static_cast<int>(std::round(w_out * s.bottleneck_ratio));
  const int groups = wb / std::min(s.group_width, wb);
  auto f = std::make_unique<Sequential>(name + ".f");
  f->add(std::make_unique<Conv2d>(name + ".f.a", ConvSpec::square(w_in, wb, 1, 1, 0, 1, 1, false), ConvInit::KaimingFanOut));
  f->add(std::make_unique<BatchNorm>(name + ".f.a_bn", wb));
  f->add(std::make_unique<ActivationLayer>(name + ".f.a_relu", compute::Activation::Relu));
  f->add(std::make_unique<Conv2d>(name + ".f.b", ConvSpec::square(wb, wb, 3, stride, 1, 1, groups, false),
                                  ConvInit::KaimingFanOut));
  f->add(std::make_unique<BatchNorm>(name + ".f.b_bn", wb));
  f->add(std::make_unique<ActivationLayer>(name + ".f.b_relu", compute::Activation::Relu));
  if (s.se_ratio > 0) {
    const int sq = static_cast<int>(std::round(s.se_ratio * w_in));
    f->add(std::make_unique<SqueezeExcite>(name + ".f.se", wb, std::max(1, sq)));
  }
  f->add(std::make_unique<Conv2d>(name + ".f.c", ConvSpec::square(wb, w_out, 1, 1, 0, 1, 1, false), ConvInit::KaimingFanOut));
  f->add(std::make_unique<BatchNorm>(name + ".f.c_bn", w_out));
  ModulePtr proj;
  if (w_in != w_out || stride != 1) {
    auto p = std::make_unique<Sequential>(name + ".proj");
    p->add(std::make_unique<Conv2d>(name + ".proj.conv", ConvSpec::square(w_in, w_out, 1, stride, 0, 1, 1, false),
                                    ConvInit::KaimingFanOut));
    p->add(std::make_unique<BatchNorm>(name + ".proj.bn", w_out));
    proj = std::move(p);
  }
  return std::make_unique<Residual>(name, std::move(f), std::move(proj), true);
}

std::unique_ptr<Sequential> build_regnet(const ModelSpec& s, bool block_ckpt, bool stage_ckpt) {
  auto net = std::make_unique<Sequential>("");
  auto stem = std::make_unique<Sequential>("stem");
  auto conv = std::make_unique<Conv2d>("stem.conv", ConvSpec::square(s.in_channels, s.stem_width, 3, 2, 1, 1, 1, false),
                                       ConvInit::KaimingFanOut);
  conv->set_input_grad(false);
  stem->add(std::move(conv));
  stem->add(std::make_unique<BatchNorm>("stem.bn", s.stem_width));
  stem->add(std::make_unique<ActivationLayer>("stem.relu", compute::Activation::Relu));
  stem->set_input_grad(false);
  net->add(std::move(stem));
  int w_in = s.stem_width;
  for (std::size_t i = 0; i < s.depths.size(); ++i) {
    const std::string sn = "stages." + std::to_string(i);
    auto stage = std::make_unique<Sequential>(sn);
    for (int b = 0; b < s.depths[i]; ++b) {
      stage->add(maybe_checkpoint(regnet_block(sn + ".blocks." + std::to_string(b), w_in, s.widths[i], b == 0 ? 2 : 1, s),
                                  block_ckpt));
      w_in = s.widths[i];
    }
    net->add(maybe_checkpoint(std::move(stage), stage_ckpt));
  }
  add_head(*net, s, s.widths.back(), false);
  return net;
}

}  // namespace

std::unique_ptr<Sequential> build_model(const ModelSpec& spec, const std::string& checkpointing) {
  spec.validate();
  TESSERA_CHECK(checkpointing == "none" || checkpointing == "block" || checkpointing == "stage",
                "checkpointing '", checkpointing, "': expected none, block or stage");
  const bool block = checkpointing == "block", stage = checkpointing == "stage";
  return spec.family == "convnext" ? build_convnext(spec, block, stage) : build_regnet(spec, block, stage);
}

std::int64_t count_parameters(Module& model) {
  std::vector<Parameter*> ps;
  model.parameters(ps);
  std::int64_t n = 0;
  for (auto* p : ps) n += p->value.numel();
  return n;
}

}  // namespace tessera::nn
