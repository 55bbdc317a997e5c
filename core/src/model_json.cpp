// Model files: JSON ⇄ ModelSpec, with errors that name the field.
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tessera/core/error.hpp"
#include "tessera/nn/models.hpp"

namespace tessera::nn {

using nlohmann::json;

namespace {

struct Reader {
  const json& j;
  std::string origin;

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw InvalidArgument(origin + ": field '" + field + "' " + what);
  }
  bool has(const char* f) const { return j.contains(f); }
  double number(const char* f, double def) const {
    if (!has(f)) return def;
    if (!j[f].is_number()) fail(f, "must be a number, got " + std::string(j[f].type_name()));
    return j[f].get<double>();
  }
  int integer(const char* f, int def) const {
    if (!has(f)) return def;
    if (!j[f].is_number_integer()) fail(f, "must be an integer, got " + j[f].dump());
    return j[f].get<int>();
  }
  std::string string(const char* f, const std::string& def) const {
    if (!has(f)) return def;
    if (!j[f].is_string()) fail(f, "must be a string, got " + j[f].dump());
    return j[f].get<std::string>();
  }
  std::vector<int> ints(const char* f) const {
    if (!has(f)) return {};
    if (!j[f].is_array()) fail(f, "must be an array of integers, got " + j[f].dump());
    std::vector<int> v;
    for (std::size_t i = 0; i < j[f].size(); ++i) {
      if (!j[f][i].is_number_integer())
        fail(std::string(f) + "[" + std::to_string(i) + "]", "must be an integer, got " + j[f][i].dump());
      v.push_back(j[f][i].get<int>());
    }
    return v;
  }
};

}  // namespace

ModelSpec model_from_json(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    throw InvalidArgument(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw InvalidArgument(origin + ": expected a JSON object describing the model");
  const std::set<std::string> known = {"name",
                                       "family",
                                       "depths",
                                       "dims",
                                       "widths",
                                       "in_channels",
                                       "num_classes",
                                       "task",
                                       "drop_path",
                                       "layer_scale_init",
                                       "stem_width",
                                       "group_width",
                                       "bottleneck_ratio",
                                       "se_ratio",
                                       "depth",
                                       "w0",
                                       "wa",
                                       "wm",
                                       "views",
                                       "fusion_dim"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key()))
      throw InvalidArgument(
          origin + ": unknown field '" + it.key() +
          "'; known fields: name, family, depths, "
          "dims/widths, in_channels, num_classes, task, drop_path, layer_scale_init, stem_width, "
          "group_width, bottleneck_ratio, se_ratio, depth, w0, wa, wm, views, "
          "fusion_dim");
  Reader r{j, origin};
  ModelSpec s;
  if (!r.has("family")) r.fail("family", "is missing; use \"convnext\" or \"regnet\"");
  s.family = r.string("family", "");
  if (s.family != "convnext" && s.family != "regnet") r.fail("family", "is '" + s.family + "'; use \"convnext\" or \"regnet\"");
  s.name = r.string("name", "custom-" + s.family);
  s.in_channels = r.integer("in_channels", 3);
  s.num_classes = r.integer("num_classes", 10);
  const std::string task = r.string("task", "classify");
  if (task != "classify" && task != "segment") r.fail("task", "is '" + task + "'; use \"classify\" or \"segment\"");
  s.task = task == "classify" ? Task::Classify : Task::Segment;
  s.depths = r.ints("depths");
  s.views = r.integer("views", 1);
  s.fusion_dim = r.integer("fusion_dim", s.fusion_dim);
  if (s.family == "convnext") {
    if (r.has("widths") && !r.has("dims")) s.widths = r.ints("widths");
    else s.widths = r.ints("dims");
    if (s.depths.empty()) r.fail("depths", "is missing (e.g. [3,3,9,3])");
    if (s.widths.empty()) r.fail("dims", "is missing (e.g. [96,192,384,768])");
    s.drop_path = r.number("drop_path", 0.0);
    s.layer_scale_init = r.number("layer_scale_init", 1e-6);
  } else {
    s.group_width = r.integer("group_width", 8);
    s.bottleneck_ratio = r.number("bottleneck_ratio", 1.0);
    s.se_ratio = r.number("se_ratio", 0.0);
    s.stem_width = r.integer("stem_width", 32);
    if (r.has("depth")) {
      for (const char* f : {"w0", "wa", "wm"})
        if (!r.has(f)) r.fail(f, "is missing; the RegNet design space needs depth, w0, wa and wm");
      regnet_widths(r.integer("depth", 0), r.number("w0", 0), r.number("wa", 0), r.number("wm", 0), s.group_width,
                    s.bottleneck_ratio, s.depths, s.widths);
    } else {
      s.widths = r.ints("widths");
      if (s.depths.empty()) r.fail("depths", "is missing (or give depth, w0, wa, wm)");
      if (s.widths.empty()) r.fail("widths", "is missing (or give depth, w0, wa, wm)");
    }
  }
  s.validate();
  return s;
}

std::string ModelSpec::to_json() const {
  json j;
  j["name"] = name;
  j["family"] = family;
  j["depths"] = depths;
  j[family == "convnext" ? "dims" : "widths"] = widths;
  j["in_channels"] = in_channels;
  j["num_classes"] = num_classes;
  j["task"] = task == Task::Classify ? "classify" : "segment";
  if (family == "convnext") {
    j["drop_path"] = drop_path;
    j["layer_scale_init"] = layer_scale_init;
  } else {
    j["stem_width"] = stem_width;
    j["group_width"] = group_width;
    j["bottleneck_ratio"] = bottleneck_ratio;
    j["se_ratio"] = se_ratio;
  }
  if (views > 1) {  // ordinary models keep the fields they always had
    j["views"] = views;
    j["fusion_dim"] = fusion_dim;
  }
  return j.dump(2);
}

}  // namespace tessera::nn
