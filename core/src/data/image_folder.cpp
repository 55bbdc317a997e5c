// Folders of JPEG and PNG images as a Dataset: listing and pairing (images/ + masks/, or one folder
// per class), header probing at open, and per-sample transforms computed for the rank's part only
// (the decoders read the source rows and columns that part's filter taps touch).
#include "tessera/data/image_folder.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>

#include "batch_part.hpp"
#include "image_decode.hpp"
#include "image_transform.hpp"
#include "tessera/core/error.hpp"

namespace tessera::data {

namespace {

namespace fs = std::filesystem;
using internal::AxisTaps;
using internal::DecodedRegion;
using internal::DecodeMode;
using internal::Geometry;
using internal::ImageInfo;
using internal::Region;

constexpr const char* kWho = "image folder";

struct Entry {
  std::string image, mask;  // mask "" for classification
  int label = -1;           // classification: the class index
  ImageInfo image_info, mask_info;
  /// A JPEG image's restart index, kept between decodes (made when the folder is opened).
  std::shared_ptr<internal::RestartSlot> restarts;
};

bool is_hidden(const fs::path& p) { return p.filename().string().starts_with("."); }

bool has_image_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return std::tolower(ch); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

/// The non-hidden entries of a directory, sorted by path.
std::vector<fs::directory_entry> sorted_entries(const fs::path& dir) {
  std::vector<fs::directory_entry> out;
  try {
    for (const auto& e : fs::directory_iterator(dir))
      if (!is_hidden(e.path())) out.push_back(e);
  } catch (const fs::filesystem_error& e) {
    throw InvalidArgument(detail::cat(kWho, " '", dir.string(), "': cannot list it: ", e.what()));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.path() < b.path(); });
  return out;
}

/// Lists a folder into samples; bad files throw or (skip_bad_samples) are left out and counted.
class Lister {
 public:
  explicit Lister(const ImageFolderOptions& o) : o_(o) {}

  std::int64_t skipped() const { return skipped_; }
  int classes() const { return classes_; }

  std::vector<Entry> list() {
    const fs::path root(o_.folder);
    std::error_code ec;
    TESSERA_CHECK(fs::is_directory(root, ec), kWho, " '", o_.folder,
                  "' is not a readable directory");
    std::vector<Entry> out =
        fs::is_directory(root / "images", ec) && fs::is_directory(root / "masks", ec)
            ? list_segmentation(root)
            : list_classification(root);
    std::sort(out.begin(), out.end(),
              [](const Entry& a, const Entry& b) { return a.image < b.image; });
    TESSERA_CHECK(
        !out.empty(), "no images in '", o_.folder,
        "': expected images/ and masks/ or one folder per class, holding .jpg, .jpeg or .png files",
        skipped_ > 0 ? detail::cat(" (", skipped_, " bad files were left out)") : std::string());
    return out;
  }

 private:
  void bad(const std::string& message) {
    if (!o_.skip_bad_samples) throw InvalidArgument(message);
    ++skipped_;
  }

  // Probes a file; false (counted) when it is bad and skipping.
  bool probe(const std::string& path, ImageInfo& info) {
    try {
      info = internal::probe_image(path);
      return true;
    } catch (const InvalidArgument& e) {
      bad(detail::cat(kWho, ": ", e.what(),
                      "; replace or remove the file, or set skip_bad_samples to leave it out"));
      return false;
    }
  }

  std::vector<Entry> list_segmentation(const fs::path& root) {
    std::map<std::string, std::string> masks;  // name → path
    for (const auto& e : sorted_entries(root / "masks")) {
      if (!e.is_regular_file()) continue;
      if (e.path().extension() == ".png")
        masks.emplace(e.path().stem().string(), e.path().string());
      else
        bad(detail::cat(kWho, ": '", e.path().string(),
                        "' in masks/ is not a PNG; masks are masks/NAME.png ",
                        "(class indices as 8/16-bit gray or palette); remove or convert it"));
    }
    std::vector<Entry> out;
    std::map<std::string, bool> used;
    for (const auto& e : sorted_entries(root / "images")) {
      if (!e.is_regular_file()) continue;
      const std::string path = e.path().string(), name = e.path().stem().string();
      if (!has_image_extension(e.path())) {
        bad(detail::cat(
            kWho, ": '", path,
            "' is not a JPEG or PNG image (.jpg, .jpeg, .png); remove it from images/"));
        continue;
      }
      const auto m = masks.find(name);
      if (m == masks.end()) {
        bad(detail::cat(kWho, ": image '", path, "' has no mask '",
                        (root / "masks" / (name + ".png")).string(),
                        "'; add the mask or remove the image"));
        continue;
      }
      if (used[name]) {
        bad(detail::cat(kWho, ": image '", path,
                        "' shares its name with another image of images/, and both ",
                        "would use mask '", m->second, "'; rename or remove one"));
        continue;
      }
      used[name] = true;
      Entry s{path, m->second, -1, {}, {}};
      if (probe(s.image, s.image_info) && probe(s.mask, s.mask_info) && check_mask(s))
        out.push_back(s);
    }
    for (const auto& [name, path] : masks)
      if (!used.count(name))
        bad(detail::cat(kWho, ": mask '", path, "' has no image '",
                        (root / "images" / name).string(),
                        ".{jpg,jpeg,png}'; add the image or remove the mask"));
    return out;
  }

  bool check_mask(const Entry& s) {
    const ImageInfo& m = s.mask_info;
    if (m.format != internal::ImageFormat::Png || !(m.palette || m.channels == 1)) {
      bad(detail::cat(
          kWho, ": mask '", s.mask, "' is ",
          m.format == internal::ImageFormat::Png ? "a colour PNG" : "a JPEG",
          "; a mask holds one class index per pixel: save it as an 8/16-bit gray or palette PNG"));
      return false;
    }
    if (m.width != s.image_info.width || m.height != s.image_info.height) {
      bad(detail::cat(kWho, ": mask '", s.mask, "' is ", m.width, "x", m.height, " but its image '",
                      s.image, "' is ", s.image_info.width, "x", s.image_info.height,
                      "; a mask must have its image's size"));
      return false;
    }
    return true;
  }

  std::vector<Entry> list_classification(const fs::path& root) {
    std::vector<Entry> out;
    for (const auto& dir : sorted_entries(root)) {
      if (!dir.is_directory()) continue;
      const int label = classes_++;
      for (const auto& e : sorted_entries(dir.path())) {
        if (!e.is_regular_file()) continue;
        if (!has_image_extension(e.path())) {
          bad(detail::cat(kWho, ": '", e.path().string(),
                          "' is not a JPEG or PNG image (.jpg, .jpeg, .png); ",
                          "remove it from the class folder"));
          continue;
        }
        Entry s{e.path().string(), "", label, {}, {}};
        if (probe(s.image, s.image_info)) out.push_back(s);
      }
    }
    return out;
  }

  const ImageFolderOptions& o_;
  std::int64_t skipped_ = 0;
  int classes_ = 0;
};

void check_options(const ImageFolderOptions& o) {
  TESSERA_CHECK(o.channels == 1 || o.channels == 3, kWho, " '", o.folder, "': channels ",
                o.channels, " must be 1 (gray) or 3 (RGB)");
  TESSERA_CHECK(o.height >= 1 && o.width >= 1, kWho, " '", o.folder, "': the output size ",
                o.height, "x", o.width,
                " must be positive; set height and width to the model's input size");
  TESSERA_CHECK(
      o.mean.size() == static_cast<std::size_t>(o.channels) && o.std.size() == o.mean.size(), kWho,
      " '", o.folder, "': mean and std need one value per channel (", o.channels, "), not ",
      o.mean.size(), " and ", o.std.size());
  for (double s : o.std)
    TESSERA_CHECK(s > 0, kWho, " '", o.folder, "': std ", s, " must be positive");
  TESSERA_CHECK(o.scale_min >= 1.0 && o.scale_max >= o.scale_min, kWho, " '", o.folder,
                "': zoom range [", o.scale_min, ", ", o.scale_max,
                "] must satisfy 1 <= scale_min <= scale_max");
}

/// A decode failure inside a file that passed the checks at open.
struct CorruptFile : InvalidArgument {
  using InvalidArgument::InvalidArgument;
};

DecodedRegion decode(const std::string& path, const ImageInfo& info, Region r, DecodeMode mode,
                     int denom, internal::RestartSlot* restarts = nullptr) {
  try {
    return internal::decode_region(path, info, r, mode, denom, restarts);
  } catch (const InvalidArgument& e) {
    throw CorruptFile(
        detail::cat(kWho, ": '", path, "' cannot be decoded although its header and end were ",
                    "fine at open (corrupt data inside): ", e.what(),
                    "; replace or remove the file, or set skip_bad_samples to ignore its labels"));
  }
}

void count_decode(DataStats& st, const DecodedRegion& d, const ImageInfo& info) {
  st.files += 1;
  st.pixels_decoded += d.pixels_decoded;
  st.pixels_total += static_cast<std::int64_t>(info.width) * info.height;
  st.bytes_read += d.bytes_read;
}

/// Where one sample's part goes in the batch: its image planes (channels p.c) and labels.
struct SampleOut {
  float* images;
  std::int64_t* labels;  // one (classification) or p.h × p.w
};

class ImageFolder final : public Dataset {
 public:
  ImageFolder(const ImageFolderOptions& o, std::vector<Entry> samples, std::int64_t skipped,
              int num_classes)
      : o_(o), samples_(std::move(samples)), open_skipped_(skipped), num_classes_(num_classes) {
    task_ = samples_.front().mask.empty() ? Task::Classify : Task::Segment;
    for (Entry& e : samples_)
      if (e.image_info.format == internal::ImageFormat::Jpeg && e.image_info.restart_rows > 0)
        e.restarts = std::make_shared<internal::RestartSlot>();
    spec_ = {o.height, o.width, o.augment, o.scale_min, o.scale_max, o.flip, o.seed};
    for (int c = 0; c < o.channels; ++c) {
      for (int wide = 0; wide < 2; ++wide)
        scale_[wide].push_back(static_cast<float>(1.0 / ((wide ? 65535.0 : 255.0) * o.std[c])));
      shift_.push_back(static_cast<float>(-o.mean[c] / o.std[c]));
    }
  }

  Task task() const noexcept override { return task_; }
  int num_classes() const noexcept override { return num_classes_; }
  core::Shape image_shape() const override { return {o_.channels, o_.height, o_.width}; }
  std::int64_t size() const noexcept override { return static_cast<std::int64_t>(samples_.size()); }

  void load_into(std::span<const std::int64_t> samples, const core::Layout& layout, int rank,
                 Batch& out) const override {
    load_into_at(samples, 0, layout, rank, out);
  }

  void load_into_at(std::span<const std::int64_t> samples, std::int64_t first_position,
                    const core::Layout& layout, int rank, Batch& b) const override {
    const internal::BatchPart p = internal::batch_part(layout, rank, image_shape(), kWho);
    internal::check_into(samples, size(), p, task_, b, kWho);
    if (b.images.is_meta()) return;
    const std::int64_t plane = p.h.size() * p.w.size();
    DataStats st;
    std::vector<float> scratch;
    for (std::int64_t n = 0; n < p.n.size(); ++n) {
      const std::int64_t row = p.n.begin + n, idx = samples[static_cast<std::size_t>(row)];
      const SampleOut out{
          b.images.data<float>() + n * p.c.size() * plane,
          b.labels.data<std::int64_t>() + (task_ == Task::Classify ? n : n * plane)};
      try {
        load_sample(idx, (first_position + row) / size(), p, out, st, scratch);
      } catch (...) {
        record(rank, st);  // what was read before the failure still counts
        throw;
      }
    }
    record(rank, st);
  }

  DataStats stats(int rank) const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    DataStats s;
    for (const auto& [r, v] : by_rank_)
      if (rank == -1 || r == rank) s += v;
    s.bad_skipped += open_skipped_;
    return s;
  }

  std::vector<std::pair<std::string, std::string>> files() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const Entry& e : samples_) out.emplace_back(e.image, e.mask);
    return out;
  }

  JpegAccess jpeg_access() const {
    JpegAccess a;
    for (const Entry& e : samples_) {
      if (e.image_info.format != internal::ImageFormat::Jpeg) continue;
      ++a.jpegs;
      if (e.image_info.restart_rows == 0) ++a.from_top;
    }
    return a;
  }

 private:
  void record(int rank, const DataStats& st) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    by_rank_[rank] += st;
  }

  void load_sample(std::int64_t idx, std::int64_t epoch, const internal::BatchPart& p,
                   const SampleOut& out, DataStats& st, std::vector<float>& scratch) const {
    const auto t0 = std::chrono::steady_clock::now();
    const Entry& e = samples_[static_cast<std::size_t>(idx)];
    const Geometry g =
        internal::draw_geometry(spec_, e.image_info.height, e.image_info.width, idx, epoch);
    const auto ry = internal::resized_coords(p.h.begin, p.h.end, g.crop_y, o_.height, false);
    const auto rx = internal::resized_coords(p.w.begin, p.w.end, g.crop_x, o_.width, g.flip);
    const bool pixels = !ry.empty() && !rx.empty();  // an uneven split can leave a rank none
    try {
      if (pixels && p.c.size() > 0) load_image(e, g, ry, rx, p, out.images, st, scratch);
      if (task_ == Task::Classify)
        out.labels[0] = e.label;
      else if (pixels)
        load_mask(e, g, ry, rx, out.labels, st);
    } catch (const CorruptFile& err) {
      skip_corrupt(e, err, p, out);
      st.bad_skipped += 1;
    }
    st.samples += 1;
    st.decode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  void load_image(const Entry& e, const Geometry& g, const std::vector<std::int64_t>& ry,
                  const std::vector<std::int64_t>& rx, const internal::BatchPart& p, float* images,
                  DataStats& st, std::vector<float>& scratch) const {
    const ImageInfo& info = e.image_info;
    int denom = 1;
    if (o_.jpeg_downscale && info.format == internal::ImageFormat::Jpeg && g.k <= 0.5)
      for (int d : {8, 4, 2})
        if (g.k * d <= 1.0) {
          denom = d;
          break;
        }
    // A scaled JPEG decode is ceil(size / denom) pixels, resampled at k·denom.
    const double k = g.k * denom;
    const AxisTaps rows = internal::linear_taps(ry, k, (info.height + denom - 1) / denom);
    const AxisTaps cols = internal::linear_taps(rx, k, (info.width + denom - 1) / denom);
    const DecodedRegion d = decode(e.image, info, {rows.src0, rows.src1, cols.src0, cols.src1},
                                   DecodeMode::Color, denom, e.restarts.get());
    count_decode(st, d, info);
    const int wide = d.bit_depth == 16 ? 1 : 0;
    const std::int64_t plane = p.h.size() * p.w.size();
    for (std::int64_t c = p.c.begin; c < p.c.end; ++c)
      internal::resample_channel(d, static_cast<int>(c), o_.channels, rows, cols, scale_[wide][c],
                                 shift_[c], images + (c - p.c.begin) * plane, scratch);
  }

  void load_mask(const Entry& e, const Geometry& g, const std::vector<std::int64_t>& ry,
                 const std::vector<std::int64_t>& rx, std::int64_t* labels, DataStats& st) const {
    const std::vector<int> iy = internal::nearest_taps(ry, g.k, e.mask_info.height);
    const std::vector<int> ix = internal::nearest_taps(rx, g.k, e.mask_info.width);
    const Region r{
        *std::min_element(iy.begin(), iy.end()), *std::max_element(iy.begin(), iy.end()) + 1,
        *std::min_element(ix.begin(), ix.end()), *std::max_element(ix.begin(), ix.end()) + 1};
    const DecodedRegion m = decode(e.mask, e.mask_info, r, DecodeMode::Index, 1);
    count_decode(st, m, e.mask_info);
    for (std::size_t y = 0; y < iy.size(); ++y)
      for (std::size_t x = 0; x < ix.size(); ++x) {
        const int v = m.at(iy[y] - r.row0, ix[x] - r.col0, 0);
        std::int64_t& out = labels[y * ix.size() + x];
        if (v == o_.mask_ignore) {
          out = -1;
        } else if (v < num_classes_) {
          out = v;
        } else {
          TESSERA_CHECK(o_.skip_bad_samples, kWho, ": mask '", e.mask, "' holds the value ", v,
                        " at row ", iy[y], ", column ", ix[x], " but num_classes is ", num_classes_,
                        ": class indices are 0..", num_classes_ - 1, " and ", o_.mask_ignore,
                        " marks ignored pixels; fix the mask, raise ",
                        "num_classes, or set skip_bad_samples to ignore such pixels");
          out = -1;
          st.labels_ignored += 1;
        }
      }
  }

  // A corrupt file under skip_bad_samples: the part's image zeros and its labels ignored, where
  // every rank is sure to agree (segmentation's pixels, or a classification image one rank holds).
  void skip_corrupt(const Entry& e, const CorruptFile& err, const internal::BatchPart& p,
                    const SampleOut& out) const {
    if (!o_.skip_bad_samples) throw InvalidArgument(err.what());
    const bool whole = p.h.size() == o_.height && p.w.size() == o_.width;
    TESSERA_CHECK(task_ == Task::Segment || whole, kWho, ": '", e.image, "' is corrupt (",
                  err.what(),
                  ") and cannot be skipped: its image is split over ranks, which may decode their "
                  "parts fine and ",
                  "would disagree about ignoring the sample; remove the file from the folder");
    const std::int64_t plane = p.h.size() * p.w.size();
    std::fill(out.images, out.images + p.c.size() * plane, 0.0f);
    std::fill(out.labels, out.labels + (task_ == Task::Segment ? plane : 1), std::int64_t{-1});
  }

  ImageFolderOptions o_;
  internal::TransformSpec spec_;
  Task task_ = Task::Classify;
  std::vector<Entry> samples_;
  std::int64_t open_skipped_ = 0;
  int num_classes_ = 0;
  std::vector<float> scale_[2], shift_;  // normalisation v·scale + shift: [8-bit, 16-bit][channel]
  mutable std::mutex mutex_;
  mutable std::map<int, DataStats> by_rank_;
};

}  // namespace

std::unique_ptr<Dataset> open_image_folder(const ImageFolderOptions& options) {
  check_options(options);
  Lister lister(options);
  std::vector<Entry> samples = lister.list();
  const bool segment = !samples.front().mask.empty();
  int num_classes = options.num_classes;
  if (segment) {
    TESSERA_CHECK(num_classes >= 1, kWho, " '", options.folder,
                  "': segmentation needs num_classes (the model's ",
                  "classes; mask values at or above it are bad input), got ", num_classes);
  } else {
    if (num_classes == 0) num_classes = lister.classes();
    TESSERA_CHECK(num_classes >= lister.classes(), kWho, " '", options.folder, "' has ",
                  lister.classes(), " class folders but num_classes is ", num_classes,
                  "; set num_classes to at least ", lister.classes(),
                  " (0 takes the folder count)");
  }
  return std::make_unique<ImageFolder>(options, std::move(samples), lister.skipped(), num_classes);
}

namespace {

const ImageFolder& as_folder(const Dataset& dataset, const char* who) {
  const auto* folder = dynamic_cast<const ImageFolder*>(&dataset);
  TESSERA_CHECK(folder != nullptr, who, ": the dataset was not made by open_image_folder");
  return *folder;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> image_folder_files(const Dataset& dataset) {
  return as_folder(dataset, "image_folder_files").files();
}

JpegAccess image_folder_jpeg_access(const Dataset& dataset) {
  return as_folder(dataset, "image_folder_jpeg_access").jpeg_access();
}

}  // namespace tessera::data
