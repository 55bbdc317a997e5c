// resolve_image_folder: data images:DIR into an opened image folder, and the checks of init_from.
#include "resolve_images.hpp"

#include <filesystem>
#include <sstream>

#include "tessera/core/error.hpp"
#include "tessera/data/image_folder.hpp"

namespace tessera::run {

namespace {

constexpr const char* kImagesPrefix = "images:";

double parse_number(const std::string& part, const std::string& whole, const char* field) {
  try {
    std::size_t used = 0;
    const double v = std::stod(part, &used);
    if (used == part.size()) return v;
  } catch (const std::exception&) {
  }
  throw InvalidArgument(detail::cat(field, " '", whole, "': '", part, "' is not a number"));
}

/// Segmentation when the folder holds images/ and masks/ (ImageFolderOptions::folder's rule).
bool segmentation_layout(const std::filesystem::path& dir) {
  return std::filesystem::is_directory(dir / "images") &&
         std::filesystem::is_directory(dir / "masks");
}

data::ImageFolderOptions folder_options(const RunSpec& spec, const TrainSetup& c) {
  data::ImageFolderOptions o;
  o.folder = spec.data.substr(std::string(kImagesPrefix).size());
  o.channels = static_cast<int>(c.train.input[0]);
  o.height = static_cast<int>(c.train.input[1]);
  o.width = static_cast<int>(c.train.input[2]);
  o.augment = spec.augment;
  std::tie(o.scale_min, o.scale_max) = parse_zoom(spec.zoom);
  o.flip = spec.flip;
  // One value stands for every channel.
  o.mean = parse_channel_values(spec.mean);
  o.std = parse_channel_values(spec.std);
  if (o.mean.size() == 1) o.mean.assign(3, o.mean[0]);
  if (o.std.size() == 1) o.std.assign(3, o.std[0]);
  o.mask_ignore = spec.mask_ignore;
  o.skip_bad_samples = spec.skip_bad_samples;
  o.seed = spec.seed;
  return o;
}

}  // namespace

std::pair<double, double> parse_zoom(const std::string& s) {
  const std::size_t colon = s.find(':');
  TESSERA_CHECK(colon != std::string::npos, "zoom '", s, "': expected MIN:MAX, e.g. 1:1.5");
  return {parse_number(s.substr(0, colon), s, "zoom"),
          parse_number(s.substr(colon + 1), s, "zoom")};
}

std::vector<double> parse_channel_values(const std::string& s) {
  std::vector<double> v;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) v.push_back(parse_number(part, s, "mean/std"));
  TESSERA_CHECK((v.size() == 1 || v.size() == 3) && s.back() != ',', "mean/std '", s,
                "': expected r,g,b or one value, e.g. 0.485,0.456,0.406");
  return v;
}

void resolve_image_folder(const RunSpec& spec, TrainSetup& c) {
  if (spec.data.rfind(kImagesPrefix, 0) != 0) return;
  data::ImageFolderOptions o = folder_options(spec, c);
  TESSERA_CHECK(std::filesystem::is_directory(o.folder), "data '", spec.data, "': no folder '",
                o.folder,
                "'; give images:DIR with DIR holding images/ and masks/ (segmentation) or one "
                "folder per class (classification)");
  const bool segment = segmentation_layout(o.folder);
  const char* layout = segment ? "segmentation layout (images/ and masks/)"
                               : "classification layout (one folder per class)";
  const std::string task = segment ? "segment" : "classify";
  TESSERA_CHECK(!spec.given.has("task") || spec.task == task, "task '", spec.task, "': data '",
                spec.data, "' has the ", layout, "; give task ", task, " or leave task out");
  TESSERA_CHECK(!segment || spec.given.has("classes"), "classes: data '", spec.data,
                "' is a segmentation folder whose masks hold class indices; give the model's "
                "class count (--classes N: mask values 0..N-1, ",
                spec.mask_ignore, " ignored)");
  // Classification: the folder's class count unless given (then at least that many).
  o.num_classes = segment || spec.given.has("classes") ? spec.classes : 0;
  c.images = data::open_image_folder(o);
  c.train.model.task = segment ? nn::Task::Segment : nn::Task::Classify;
  c.train.model.num_classes = c.images->num_classes();
}

std::string images_notice(const TrainSetup& setup) {
  if (setup.images == nullptr) return "";
  int rows_split = 1;  // ranks an image's rows are split over
  for (int d = 0; d < setup.mesh.ndim(); ++d) {
    const std::string& name = setup.mesh.dim_name(d);
    if (name == "sp_h" || (name == "sp" && setup.train.shard == "H"))
      rows_split *= setup.mesh.dim_size(d);
  }
  if (rows_split == 1) return "";
  const data::JpegAccess a = data::image_folder_jpeg_access(*setup.images);
  if (a.from_top == 0) return "";
  const std::string folder = setup.data.substr(std::string(kImagesPrefix).size());
  return detail::cat(
      "data ", setup.data, ": ", a.from_top, " of ", a.jpegs,
      " JPEGs have no restart markers, so each rank below the top of an image decodes (Huffman) "
      "every row above its shard and its decode time does not fall as 1/",
      rows_split, "; `tessera images add-restarts ", folder,
      " NEW_FOLDER` adds them without changing a pixel");
}

void check_init_from(const RunSpec& spec) {
  if (spec.init_from.empty()) return;
  TESSERA_CHECK(spec.resume.empty() || spec.resume == "auto", "init_from '", spec.init_from,
                "' and resume '", spec.resume,
                "': a resumed run continues from its checkpoint's own weights; give resume to "
                "continue a run, or init_from to start a new one from pretrained weights, not both "
                "(but with resume auto, which takes init_from while no checkpoint exists yet)");
  TESSERA_CHECK(std::filesystem::is_regular_file(spec.init_from), "init_from '", spec.init_from,
                "': no such file; give a .safetensors file (timm's pretrained weights, or "
                "`tessera export CHECKPOINT --to safetensors`)");
}

}  // namespace tessera::run
