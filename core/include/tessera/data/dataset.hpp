// Datasets that hand each rank only its own shard of a batch: images (NCHW) and labels.
#pragma once

#include <cstdint>
#include <memory>
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
  /// Batch `step` (samples step·B … step·B+B−1 modulo size(), B = layout's global N), the part
  /// that `rank` holds under `layout` (an NCHW layout over the global batch).
  virtual Batch load(std::int64_t step, const core::Layout& layout, int rank,
                     const core::AllocatorPtr& allocator) const = 0;
};

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
