// Datasets that hand each rank only its own shard of a batch: images (NCHW) and labels.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "tessera/core/layout.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::data {

enum class Task { Classify, Segment };

/// This rank's part of one batch: images in the input layout's local shape and labels — (N)
/// for classification (the local batch), (N,H,W) for segmentation (the local pixels).
struct Batch {
  core::Tensor images;  ///< f32, category Activation
  core::Tensor labels;  ///< i64
};

/// What a dataset read and decoded: the input side of a rank's I/O, in its metrics.
struct DataStats {
  std::int64_t samples = 0;         ///< sample parts loaded (one per batch row this rank holds)
  std::int64_t files = 0;           ///< image and mask files opened for decoding
  std::int64_t pixels_decoded = 0;  ///< pixels the decoders produced (images and masks)
  std::int64_t pixels_total = 0;    ///< pixels of the same files in full: decoded / total is the
                                    ///< share a rank decoded with shard-only decoding
  std::int64_t bytes_read = 0;      ///< bytes read from the files
  double decode_s = 0;              ///< seconds in decoding and transforms (summed over threads)
  std::int64_t bad_skipped = 0;     ///< bad samples skipped (skip_bad_samples), at open and since
  std::int64_t labels_ignored = 0;  ///< labels set to ignore (-1) because their value was bad

  DataStats& operator+=(const DataStats& o);      ///< adds every count and the seconds
  DataStats operator-(const DataStats& o) const;  ///< what was done between two cumulative stats
};

/// A dataset of fixed-size images. Implementations must produce identical pixels for a global
/// index whatever the layout: the sharded run sees exactly the unsharded run's data.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual Task task() const noexcept = 0;
  virtual int num_classes() const noexcept = 0;
  /// (C, H, W) of one image.
  virtual core::Shape image_shape() const = 0;
  /// Number of distinct samples (batches wrap around).
  virtual std::int64_t size() const noexcept = 0;
  /// Fills `out` — `rank`'s part of a batch under `layout` (an NCHW layout over the global batch),
  /// as allocate_batch() makes it — with the batch whose row n holds sample samples[n]
  /// (samples.size() is the layout's global N, each in [0, size())). Reads only the rows,
  /// channels and pixels `rank` holds; does nothing to meta tensors. Must be safe to call from
  /// several threads at once (a Loader's threads do). Throws InvalidArgument naming the dataset
  /// for a layout that does not hold its images, a wrong sample count or index, or an `out` of
  /// other shapes.
  virtual void load_into(std::span<const std::int64_t> samples, const core::Layout& layout, int rank,
                         Batch& out) const = 0;
  /// load_into() for the batch whose row n sits at position first_position + n of the run's
  /// sample order (SampleOrder: position p is in epoch p / size()). A dataset with random
  /// transforms draws them from (its seed, the sample, the sample's epoch), so each epoch sees new
  /// draws and every rank that holds part of a sample the same ones. The Loader calls this; the
  /// default ignores the position (datasets without random transforms).
  virtual void load_into_at(std::span<const std::int64_t> samples, std::int64_t first_position,
                            const core::Layout& layout, int rank, Batch& out) const {
    (void)first_position;
    load_into(samples, layout, rank, out);
  }
  /// What this dataset object has read and decoded so far for `rank` (its load_into calls with
  /// that rank, from any thread), or for all ranks with rank −1; cumulative since it was opened
  /// (bad_skipped includes the files left out at open). In-process ranks share one dataset
  /// object, hence the rank. Datasets that decode files count them; the others report zeros.
  virtual DataStats stats(int rank = -1) const {
    (void)rank;
    return {};
  }

  /// allocate_batch() with `allocator` (null: unbooked host memory), then load_into().
  Batch load_samples(std::span<const std::int64_t> samples, const core::Layout& layout, int rank,
                     const core::AllocatorPtr& allocator) const;
  /// Batch `step` in index order: samples step·B … step·B+B−1 modulo size(), B = layout's
  /// global N (what a Loader without shuffling hands for that step).
  Batch load(std::int64_t step, const core::Layout& layout, int rank, const core::AllocatorPtr& allocator) const;
};

/// Uninitialised tensors for `rank`'s part of a batch of `task` under `layout` (N,C,H,W): images
/// f32 (N,C,H,W), labels i64 — (N) for classification, (N,H,W) for segmentation — both booked as
/// activations with `allocator` (null: unbooked host memory; meta: shapes only).
Batch allocate_batch(const core::Layout& layout, int rank, Task task, const core::AllocatorPtr& allocator);

struct SyntheticOptions {
  Task task = Task::Classify;
  int channels = 3, height = 256, width = 1024;
  int num_classes = 4;
  std::int64_t size = 1024;
  std::uint64_t seed = 0;
};

/// Deterministic synthetic images with a real learning signal: each sample shows shapes
/// (disc, square, ring, cross, ...) whose kind, position, size and colour derive from
/// (seed, sample index); the class is the kind of the largest shape, the segmentation label of a
/// pixel is the kind of the shape covering it (0 = background). Pixels are computed shard by
/// shard: no rank materialises a whole image.
std::unique_ptr<Dataset> make_synthetic(const SyntheticOptions& options);

/// A folder of .npy images: files `<folder>/*.npy` (float32, C×H×W, C-order) sorted by name and
/// `<folder>/labels.npy` (int64: (count) for classification or (count,H,W) for segmentation).
/// Validates every header on open; errors name the file and what is wrong.
std::unique_ptr<Dataset> open_npy_folder(const std::string& folder, int num_classes);

}  // namespace tessera::data
