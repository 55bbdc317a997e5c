// A folder of .npy images plus labels.npy, validated on open; load() reads only the row segments
// of the rank's shard from each image.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <vector>

#include "batch_part.hpp"
#include "npy.hpp"
#include "tessera/core/error.hpp"
#include "tessera/data/dataset.hpp"

namespace tessera::data {

namespace {

namespace fs = std::filesystem;
using internal::NpyHeader;
using internal::ReadFile;

/// Reads and checks the header of one array: dtype `descr` (`esize` bytes), C order, and a file
/// size equal to the header plus the data.
NpyHeader checked_header(const ReadFile& f, const char* descr, std::uint64_t esize, const char* type_name) {
  NpyHeader h = internal::read_npy_header(f);
  TESSERA_CHECK(h.descr == descr, "'", f.path(), "' holds dtype '", h.descr, "' but ", type_name, " ('", descr,
                "') is required; convert with array.astype('", descr, "')");
  TESSERA_CHECK(!h.fortran_order, "'", f.path(), "' is stored in Fortran order; save a C-order array "
                "(numpy.ascontiguousarray) instead");
  const std::uint64_t have = f.size() - h.data_offset;
  std::uint64_t bytes = esize;  // overflow-safe: stops growing once past what the file holds
  for (auto d : h.shape) bytes = (d != 0 && bytes > have / static_cast<std::uint64_t>(d)) ? have + 1 : bytes * d;
  TESSERA_CHECK(have == bytes, "'", f.path(), "' has ", have, " bytes of data but its shape ",
                core::shape_str(h.shape), bytes > have ? " needs more (truncated?)" : " needs fewer (trailing bytes?)");
  return h;
}

class NpyFolder final : public Dataset {
 public:
  NpyFolder(const std::string& folder, int num_classes) : num_classes_(num_classes) {
    TESSERA_CHECK(num_classes >= 2, "npy folder '", folder, "': num_classes ", num_classes, " must be at least 2");
    std::error_code ec;
    TESSERA_CHECK(fs::is_directory(folder, ec), "npy folder '", folder, "' is not a readable directory");
    try {
      for (const auto& e : fs::directory_iterator(folder))
        if (e.path().extension() == ".npy" && e.path().filename() != "labels.npy") images_.push_back(e.path().string());
    } catch (const fs::filesystem_error& e) {
      throw InvalidArgument(detail::cat("npy folder '", folder, "': cannot list it: ", e.what()));
    }
    std::sort(images_.begin(), images_.end());
    TESSERA_CHECK(!images_.empty(), "npy folder '", folder, "' holds no image files (<name>.npy)");
    for (const std::string& path : images_) {
      const NpyHeader h = checked_header(ReadFile(path), "<f4", 4, "little-endian float32");
      TESSERA_CHECK(h.shape.size() == 3 && core::shape_numel(h.shape) > 0, "'", path, "' has shape ",
                    core::shape_str(h.shape), "; images must be C x H x W with positive sizes");
      if (image_.empty()) image_ = h.shape;
      TESSERA_CHECK(h.shape == image_, "'", path, "' has shape ", core::shape_str(h.shape), " but '", images_[0],
                    "' has ", core::shape_str(image_), "; all images of a folder must have one shape");
      offsets_.push_back(h.data_offset);
    }
    labels_path_ = (fs::path(folder) / "labels.npy").string();
    TESSERA_CHECK(fs::exists(labels_path_, ec), "npy folder '", folder, "' has no labels.npy: it needs one int64 "
                  "array of labels, (count) for classification or (count, H, W) for segmentation");
    check_labels();
  }

  Task task() const noexcept override { return task_; }
  int num_classes() const noexcept override { return num_classes_; }
  core::Shape image_shape() const override { return image_; }
  std::int64_t size() const noexcept override { return static_cast<std::int64_t>(images_.size()); }

  void load_into(std::span<const std::int64_t> samples, const core::Layout& layout, int rank,
                 Batch& b) const override {
    const internal::BatchPart p = internal::batch_part(layout, rank, image_, "npy folder");
    internal::check_into(samples, size(), p, task_, b, "npy folder");
    if (b.images.is_meta()) return;
    const std::int64_t H = image_[1], W = image_[2], lh = p.h.size(), lw = p.w.size();
    std::optional<ReadFile> labels;
    if (task_ == Task::Segment) labels.emplace(labels_path_);
    float* img = b.images.data<float>();
    std::int64_t* lab = b.labels.data<std::int64_t>();
    for (std::int64_t n = 0; n < p.n.size(); ++n) {
      const std::int64_t idx = samples[static_cast<std::size_t>(p.n.begin + n)];
      const ReadFile f(images_[idx]);
      for (std::int64_t c = p.c.begin; c < p.c.end; ++c) {
        float* out = img + ((n * p.c.size() + (c - p.c.begin)) * lh) * lw;
        const std::uint64_t plane = offsets_[idx] + static_cast<std::uint64_t>(c * H * W) * 4;
        read_rows(f, out, 4, plane, p, W);
      }
      if (task_ == Task::Classify) {
        lab[n] = class_labels_[idx];
      } else {
        read_rows(*labels, lab + n * lh * lw, 8, labels_offset_ + static_cast<std::uint64_t>(idx * H * W) * 8, p, W);
        for (std::int64_t i = 0; i < lh * lw; ++i)
          check_label(lab[n * lh * lw + i], (idx * H + p.h.begin + i / lw) * W + p.w.begin + i % lw);
      }
    }
  }

 private:
  // Reads rows p.h, columns p.w of a C-order (H, W) plane of `esize`-byte elements at `plane`:
  // one read when the part spans whole rows, else one read per row segment.
  static void read_rows(const ReadFile& f, void* out, std::uint64_t esize, std::uint64_t plane,
                        const internal::BatchPart& p, std::int64_t W) {
    auto* dst = static_cast<char*>(out);
    const std::uint64_t seg = static_cast<std::uint64_t>(p.w.size()) * esize;
    if (p.w.size() == W) {
      f.read_at(dst, seg * p.h.size(), plane + static_cast<std::uint64_t>(p.h.begin * W) * esize);
      return;
    }
    for (std::int64_t h = p.h.begin; h < p.h.end; ++h, dst += seg)
      f.read_at(dst, seg, plane + static_cast<std::uint64_t>(h * W + p.w.begin) * esize);
  }

  void check_label(std::int64_t v, std::int64_t position) const {
    TESSERA_CHECK(v >= -1 && v < num_classes_, "'", labels_path_, "': label ", v, " at position ", position,
                  " is outside [-1, ", num_classes_, "): classes are 0..", num_classes_ - 1,
                  " and -1 marks an ignored ", task_ == Task::Classify ? "sample" : "pixel");
  }

  // Checks labels.npy's header, count and every value (streamed in chunks: segmentation labels
  // can be large); keeps classification labels in memory.
  void check_labels() {
    const ReadFile f(labels_path_);
    const NpyHeader h = checked_header(f, "<i8", 8, "int64");
    const auto count = static_cast<std::int64_t>(images_.size());
    if (h.shape.size() == 1) {
      task_ = Task::Classify;
    } else if (h.shape.size() == 3 && h.shape[1] == image_[1] && h.shape[2] == image_[2]) {
      task_ = Task::Segment;
    } else {
      throw InvalidArgument(detail::cat("'", labels_path_, "' has shape ", core::shape_str(h.shape),
                                        "; labels must be (count) for classification or (count, ", image_[1], ", ",
                                        image_[2], ") for segmentation of ", core::shape_str(image_), " images"));
    }
    TESSERA_CHECK(h.shape[0] == count, "'", labels_path_, "' holds ", h.shape[0], " labels but the folder has ",
                  count, " images; give one label ", task_ == Task::Classify ? "" : "map ", "per image");
    labels_offset_ = h.data_offset;
    const std::int64_t total = core::shape_numel(h.shape);
    std::vector<std::int64_t> chunk;
    for (std::int64_t at = 0; at < total; at += 1 << 16) {
      chunk.resize(static_cast<std::size_t>(std::min<std::int64_t>(1 << 16, total - at)));
      f.read_at(chunk.data(), chunk.size() * 8, h.data_offset + static_cast<std::uint64_t>(at) * 8);
      for (std::size_t i = 0; i < chunk.size(); ++i) check_label(chunk[i], at + static_cast<std::int64_t>(i));
      if (task_ == Task::Classify) class_labels_.insert(class_labels_.end(), chunk.begin(), chunk.end());
    }
  }

  int num_classes_;
  Task task_ = Task::Classify;
  core::Shape image_;                    // (C, H, W)
  std::vector<std::string> images_;      // sorted paths
  std::vector<std::uint64_t> offsets_;   // data offset of each image file
  std::string labels_path_;
  std::uint64_t labels_offset_ = 0;
  std::vector<std::int64_t> class_labels_;
};

}  // namespace

std::unique_ptr<Dataset> open_npy_folder(const std::string& folder, int num_classes) {
  return std::make_unique<NpyFolder>(folder, num_classes);
}

}  // namespace tessera::data
