// timm's names for tessera's ConvNeXt and RegNet tensors, and loading and exporting weights by
// them (timm 1.0's module names: convnext.py and regnet.py).
#include "tessera/nn/weights.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "tessera/core/error.hpp"
#include "tessera/core/half.hpp"

namespace tessera::nn {

namespace {

using core::DType;
using core::Tensor;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == '.')
      out.emplace_back();
    else
      out.back().push_back(c);
  }
  return out;
}

bool is_index(const std::string& s) {
  return !s.empty() && s.size() < 6 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(c); });
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// "stages.i.blocks.j.<module>.<leaf>" and the like, for ConvNeXt (p: the name's parts).
std::string convnext_timm(const std::vector<std::string>& p) {
  const std::string& leaf = p.back();
  if (p.size() == 3 && p[0] == "stem" && (p[1] == "conv" || p[1] == "norm"))
    return std::string("stem.") + (p[1] == "conv" ? "0." : "1.") + leaf;
  if (p.size() == 3 && p[0] == "head" && (p[1] == "norm" || p[1] == "fc"))
    return "head." + p[1] + "." + leaf;
  if (p.size() < 5 || p[0] != "stages" || !is_index(p[1])) return "";
  const std::string stage = "stages." + p[1] + ".";
  if (p.size() == 5 && p[2] == "downsample" && (p[3] == "norm" || p[3] == "conv"))
    return stage + "downsample." + (p[3] == "norm" ? "0." : "1.") + leaf;
  if (p.size() != 6 || p[2] != "blocks" || !is_index(p[3])) return "";
  const std::string block = stage + "blocks." + p[3] + ".";
  static const std::map<std::string, std::string> kBlock = {
      {"dwconv", "conv_dw"}, {"norm", "norm"}, {"pwconv1", "mlp.fc1"}, {"pwconv2", "mlp.fc2"}};
  if (p[4] == "gamma" && leaf == "gamma") return block + "gamma";  // LayerScale: a block parameter
  const auto it = kBlock.find(p[4]);
  return it == kBlock.end() ? "" : block + it->second + "." + leaf;
}

/// "stages.i.blocks.j.f.<module>.<leaf>" → "s{i+1}.b{j+1}.<timm module>.<leaf>", for RegNet.
std::string regnet_timm(const std::vector<std::string>& p) {
  const std::string& leaf = p.back();
  if (p.size() == 3 && p[0] == "stem" && (p[1] == "conv" || p[1] == "bn"))
    return "stem." + p[1] + "." + leaf;
  if (p.size() == 3 && p[0] == "head" && p[1] == "fc") return "head.fc." + leaf;
  if (p.size() < 7 || p[0] != "stages" || !is_index(p[1]) || p[2] != "blocks" || !is_index(p[3]))
    return "";
  const std::string block =
      "s" + std::to_string(std::stoi(p[1]) + 1) + ".b" + std::to_string(std::stoi(p[3]) + 1) + ".";
  static const std::map<std::string, std::string> kBody = {
      {"a", "conv1.conv"},  {"a_bn", "conv1.bn"}, {"b", "conv2.conv"},
      {"b_bn", "conv2.bn"}, {"c", "conv3.conv"},  {"c_bn", "conv3.bn"}};
  if (p.size() == 7 && p[4] == "f" && kBody.count(p[5])) return block + kBody.at(p[5]) + "." + leaf;
  if (p.size() == 8 && p[4] == "f" && p[5] == "se" && (p[6] == "fc1" || p[6] == "fc2"))
    return block + "se." + p[6] + "." + leaf;
  if (p.size() == 7 && p[4] == "proj" && (p[5] == "conv" || p[5] == "bn"))
    return block + "downsample." + p[5] + "." + leaf;
  return "";
}

/// The presets timm has, by timm's name. regnetx-400mf and regnety-800mf round their widths to the
/// group width as torchvision (and pycls) do: timm's default regnetx_004 / regnety_008 round
/// otherwise (widths 384 / 128 and 768 where tessera's are 400 / 144 and 784); its _tv ones agree.
const std::vector<std::pair<std::string, std::string>>& timm_presets() {
  static const std::vector<std::pair<std::string, std::string>> kList = {
      {"convnext-atto", "convnext_atto"},  {"convnext-femto", "convnext_femto"},
      {"convnext-pico", "convnext_pico"},  {"convnext-nano", "convnext_nano"},
      {"convnext-t", "convnext_tiny"},     {"convnext-s", "convnext_small"},
      {"convnext-b", "convnext_base"},     {"convnext-l", "convnext_large"},
      {"convnext-xl", "convnext_xlarge"},  {"regnetx-200mf", "regnetx_002"},
      {"regnetx-400mf", "regnetx_004_tv"}, {"regnetx-800mf", "regnetx_008"},
      {"regnety-200mf", "regnety_002"},    {"regnety-400mf", "regnety_004"},
      {"regnety-800mf", "regnety_008_tv"}};
  return kList;
}

/// timm builds convnext_atto..nano with conv_mlp=True: their mlp weights are 1×1 convolutions.
bool timm_conv_mlp(const std::string& timm_model) {
  return timm_model == "convnext_atto" || timm_model == "convnext_femto" ||
         timm_model == "convnext_pico" || timm_model == "convnext_nano";
}

bool is_classifier(const std::string& name) {
  return name.rfind("head.fc.", 0) == 0 || name.rfind("fusion.fc.", 0) == 0 ||
         name.rfind("head.classifier.", 0) == 0;
}

/// Equal shapes, or a Linear weight (O, I) and a 1×1 convolution weight (O, I, 1, 1).
bool compatible(const core::Shape& a, const core::Shape& b) {
  if (a == b) return true;
  const auto squeeze = [](const core::Shape& s) {
    return s.size() == 4 && s[2] == 1 && s[3] == 1 ? core::Shape{s[0], s[1]} : s;
  };
  return squeeze(a) == squeeze(b);
}

double element(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::F64:
      return t.data<double>()[i];
    case DType::F32:
      return t.data<float>()[i];
    case DType::BF16:
    case DType::F16:
      return core::half_to_float(t.data<std::uint16_t>()[i], t.dtype());
    case DType::I64:
      return static_cast<double>(t.data<std::int64_t>()[i]);
    case DType::I32:
      return t.data<std::int32_t>()[i];
  }
  return 0;
}

/// A contiguous host copy of `src` (host, contiguous) in `dtype` (f64 ↔ f32: exact where f32
/// can hold the value; to bf16/f16: rounded once from the value).
Tensor convert(const Tensor& src, DType dtype) {
  if (src.dtype() == dtype) return src;
  Tensor out = Tensor::empty(src.shape(), dtype, core::MemCategory::Workspace);
  for (std::int64_t i = 0; i < src.numel(); ++i) {
    const double v = element(src, i);
    switch (dtype) {
      case DType::F64:
        out.data<double>()[i] = v;
        break;
      case DType::F32:
        out.data<float>()[i] = static_cast<float>(v);
        break;
      case DType::BF16:
      case DType::F16:
        out.data<std::uint16_t>()[i] = core::double_to_half(v, dtype);
        break;
      case DType::I64:
        out.data<std::int64_t>()[i] = static_cast<std::int64_t>(v);
        break;
      case DType::I32:
        out.data<std::int32_t>()[i] = static_cast<std::int32_t>(v);
        break;
    }
  }
  return out;
}

std::string name_list(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < 8; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 8) out += ", … and " + std::to_string(names.size() - 8) + " more";
  return out;
}

[[noreturn]] void matches_nothing(const std::string& path, const ModelSpec& spec,
                                  const std::map<std::string, const Tensor*>& file,
                                  const std::vector<std::pair<std::string, Tensor*>>& targets) {
  throw InvalidArgument(detail::cat(
      "weights file '", path, "' (", file.size(), " tensors, e.g. '",
      file.empty() ? "" : file.begin()->first, "') matches none of model '", spec.name, "''s ",
      targets.size(), " tensors (e.g. '", targets.empty() ? "" : targets[0].first, "', timm: '",
      targets.empty() ? "" : timm_name(spec, targets[0].first),
      "'): it holds weights of another model family; pick the model the weights were trained as"));
}

/// Whether `file` uses timm's names: they match more of the model's tensors than tessera's do.
bool file_uses_timm(const ModelSpec& spec, const std::map<std::string, const Tensor*>& file,
                    const std::vector<std::pair<std::string, Tensor*>>& targets) {
  std::size_t own = 0, timm = 0;
  for (const auto& [name, t] : targets) {
    own += file.count(name);
    timm += file.count(timm_name(spec, name));
  }
  return timm > own;
}

}  // namespace

std::string timm_model_name(const ModelSpec& spec) {
  // A segmentation model maps onto the classifier of its backbone (its head is left out).
  if (spec.views > 1 || spec.in_channels != 3) return "";
  for (const auto& [preset, timm] : timm_presets()) {
    const ModelSpec p = model_preset(preset);
    if (p.family != spec.family || p.depths != spec.depths || p.widths != spec.widths) continue;
    if (spec.family == "convnext" && spec.layer_scale_init > 0) return timm;
    if (spec.family == "regnet" && spec.group_width == p.group_width &&
        spec.se_ratio == p.se_ratio && spec.stem_width == p.stem_width &&
        spec.bottleneck_ratio == p.bottleneck_ratio)
      return timm;
  }
  return "";
}

std::string timm_name(const ModelSpec& spec, const std::string& tessera_name) {
  const std::vector<std::string> parts = split(tessera_name);
  if (parts.size() < 3) return "";
  return spec.family == "convnext" ? convnext_timm(parts) : regnet_timm(parts);
}

std::string WeightReport::summary() const {
  std::ostringstream os;
  os << "loaded " << loaded << " tensors (" << naming << " names)";
  if (!missing.empty()) os << "; missing (kept their initialisation): " << name_list(missing);
  if (!unexpected.empty()) os << "; unexpected (not used): " << name_list(unexpected);
  if (!replaced.empty())
    os << "; replaced (" << file_classes << " → " << model_classes
       << " classes): " << name_list(replaced);
  return os.str();
}

WeightReport load_weights(const std::string& path, const ModelSpec& spec,
                          const std::vector<std::pair<std::string, core::Tensor*>>& targets) {
  const NamedTensors file = read_safetensors(path);
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : file) by_name.emplace(name, &t);
  WeightReport r;
  const bool timm = file_uses_timm(spec, by_name, targets);
  r.naming = timm ? "timm" : "tessera";
  std::vector<std::pair<Tensor*, const Tensor*>> copies;
  std::set<std::string> used;
  std::size_t body = 0;  // tensors loaded outside the classifier
  for (const auto& [name, t] : targets) {
    const std::string key = timm ? timm_name(spec, name) : name;
    const auto it = key.empty() ? by_name.end() : by_name.find(key);
    if (it == by_name.end()) {
      r.missing.push_back(name);
      continue;
    }
    used.insert(key);
    const Tensor& src = *it->second;
    if (!compatible(src.shape(), t->shape())) {
      TESSERA_CHECK(is_classifier(name), "weights file '", path, "': tensor '", key, "' is ",
                    core::shape_str(src.shape()), " but model '", spec.name, "''s '", name, "' is ",
                    core::shape_str(t->shape()),
                    ": the file holds another model size (check the model preset ",
                    "against the weights' model); nothing was loaded");
      r.replaced.push_back(name);
      r.file_classes = src.shape()[0];
      r.model_classes = t->shape()[0];
      continue;
    }
    copies.emplace_back(t, &src);
    body += !is_classifier(name);
  }
  if (body == 0) matches_nothing(path, spec, by_name, targets);  // (a classifier alone is no match)
  for (const auto& [name, t] : file)
    if (!used.count(name) && !ends_with(name, ".num_batches_tracked")) r.unexpected.push_back(name);
  for (auto& [dst, src] : copies) dst->copy_from(convert(*src, dst->dtype()).reshape(dst->shape()));
  r.loaded = static_cast<std::int64_t>(copies.size());
  return r;
}

NamedTensors export_weights(const CheckpointData& checkpoint, const std::string& naming,
                            std::vector<std::string>* left_out) {
  TESSERA_CHECK(naming == "timm" || naming == "tessera", "export naming '", naming,
                "': expected timm or tessera");
  const auto model = checkpoint.meta.find("model");
  TESSERA_CHECK(model != checkpoint.meta.end(),
                "the checkpoint has no 'model' entry: it was not written by "
                "tessera's trainer (Trainer::save / tessera train --save)");
  const ModelSpec spec = model_from_json(model->second, "the checkpoint's model");
  const std::string timm_model = timm_model_name(spec);
  NamedTensors out;
  for (const auto& [name, t] : checkpoint.tensors) {
    if (name.rfind("optimizer.", 0) == 0 || name.rfind("grad_residual.", 0) == 0) continue;
    if (naming == "tessera") {
      out.emplace_back(name, t);
      continue;
    }
    const std::string key = timm_name(spec, name);
    if (key.empty()) {  // a head timm's model does not have: the backbone goes out alone
      if (left_out) left_out->push_back(name);
      continue;
    }
    Tensor v = t.contiguous();
    const bool mlp = ends_with(key, "mlp.fc1.weight") || ends_with(key, "mlp.fc2.weight");
    const bool se = ends_with(key, "se.fc1.weight") || ends_with(key, "se.fc2.weight");
    if ((mlp && timm_conv_mlp(timm_model)) || se)
      v = v.reshape({v.size(0), v.size(1), 1, 1});
    else if (mlp)
      v = v.reshape({v.size(0), v.size(1)});
    out.emplace_back(key, v);
    if (ends_with(key,
                  ".running_var"))  // timm's BatchNorm counts its updates; 0 makes no difference
      out.emplace_back(key.substr(0, key.size() - 11) + "num_batches_tracked",
                       Tensor::zeros(core::Shape{}, DType::I64));
  }
  return out;
}

std::string export_checkpoint(const std::string& checkpoint, const std::string& out,
                              const std::string& naming, std::vector<std::string>* left_out) {
  const CheckpointData data = load_checkpoint_stages(checkpoint);
  const NamedTensors ts = export_weights(data, naming, left_out);
  const ModelSpec spec = model_from_json(data.meta.at("model"), "checkpoint '" + checkpoint + "'");
  const std::string timm_model = timm_model_name(spec);
  std::map<std::string, std::string> meta{{"format", "pt"}, {"tessera_model", spec.to_json()}};
  if (!timm_model.empty()) meta["timm_model"] = timm_model;
  if (data.meta.count("step")) meta["step"] = data.meta.at("step");
  std::vector<std::pair<std::string, const Tensor*>> ptrs;
  for (const auto& [n, t] : ts) ptrs.emplace_back(n, &t);
  write_safetensors(out, ptrs, meta);
  return timm_model;
}

}  // namespace tessera::nn
