// Folders of real images (JPEG, PNG) as datasets: the segmentation layout (images/ + masks/) and
// the classification layout (one folder per class), with per-sample transforms drawn from the
// seed, and each rank decoding only the part of an image its shard needs (docs/training.md,
// "Train on your own images from pretrained weights").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/data/dataset.hpp"

namespace tessera::data {

struct ImageFolderOptions {
  /// The folder. Segmentation when it holds images/ and masks/ (images/NAME.{jpg,jpeg,png} with
  /// masks/NAME.png of class indices: 8/16-bit gray or palette indices, the Cityscapes/ADE
  /// layout); otherwise classification: one sub-folder per class (sorted names give the class
  /// indices 0, 1, ..., torchvision's ImageFolder), images inside.
  std::string folder;
  /// Classes of the model. Classification: at least the number of class folders (0: exactly
  /// that number). Segmentation: required; a mask value at or above it is bad input.
  int num_classes = 0;
  /// The size every sample is transformed to (the model's input): C is 1 (gray; RGB images are
  /// converted by luma) or 3 (RGB; gray images are replicated, alpha is dropped).
  int channels = 3, height = 0, width = 0;
  /// Random transforms (training). On: each sample is resized to cover the output (the smaller
  /// scale that makes both sides at least the output's) times a zoom drawn from [scale_min,
  /// scale_max], cropped at a random place and flipped left-right with probability 1/2 (flip).
  /// Off: resized to cover and centre-cropped (evaluation). Draws come from (seed, sample,
  /// epoch) only — a splitmix64 counter hash, never a shared generator: identical on every rank
  /// and thread, reproducible. Images are resampled as PIL's BILINEAR (half-pixel centres; when
  /// shrinking, a triangle filter widened by the shrink factor); at scale 1 (the covering side
  /// already the output's, no zoom) pixels pass through untouched. Masks take the nearest pixel.
  bool augment = true;
  double scale_min = 1.0, scale_max = 1.0;  ///< zoom range; 1 <= scale_min <= scale_max
  bool flip = true;
  /// Normalisation of pixel values in [0, 1] (8-bit / 255, 16-bit / 65535): (v − mean) / std per
  /// channel, one value per output channel (set both for channels = 1). ImageNet's by default
  /// (what timm's pretrained ConvNeXt and RegNet expect).
  std::vector<double> mean = {0.485, 0.456, 0.406};
  std::vector<double> std = {0.229, 0.224, 0.225};
  /// The mask value that marks pixels to ignore (label −1); 255 as in Cityscapes and ADE20K.
  int mask_ignore = 255;
  /// Off: bad input (an unreadable, truncated or corrupt file, a mask whose size differs from
  /// its image, a mask value out of range) throws InvalidArgument naming the file and the fix.
  /// On: a file found bad when the folder is opened is left out of the samples, a bad mask value
  /// becomes ignore (−1), and a file found corrupt while decoding gives a sample whose labels
  /// (the rank's pixels, or the sample) are ignored — all counted in stats().bad_skipped and
  /// labels_ignored. (Classification with the image split over ranks cannot ignore a sample
  /// only one rank found corrupt; that still throws.)
  bool skip_bad_samples = false;
  std::uint64_t seed = 0;
  /// JPEG: decode in the DCT domain at 1/2, 1/4 or 1/8 scale when the resize shrinks that much
  /// (libjpeg-turbo's scaled decoding, what PIL's draft mode does); same pixels on every rank.
  bool jpeg_downscale = true;
};

/// Opens a folder: lists it, reads every file's header (and checks that it ends as its format
/// requires) and pairs masks with images. Throws InvalidArgument naming the folder or file and
/// what to do: an empty folder, no class folders, an unreadable or foreign file, a mask missing
/// or of another size than its image (with skip_bad_samples the last ones are left out and
/// counted). Thread-safe loading; a rank decodes only the rows and columns (JPEG: rows and
/// iMCU columns; PNG: rows up to its last) its shard of each sample needs, and computes every
/// pixel from its own coordinates, so a sharded batch equals the unsharded one bit for bit.
/// stats(rank): the files left out at open count in bad_skipped of every rank and once in
/// rank −1's sum (every rank's dataset left them out); what loading finds counts in the rank that
/// found it.
std::unique_ptr<Dataset> open_image_folder(const ImageFolderOptions& options);

/// The files of a folder as open_image_folder() pairs them: (image, mask or "") in sample order,
/// after any left out. For the CLI's summary and the tests.
std::vector<std::pair<std::string, std::string>> image_folder_files(const Dataset& dataset);

/// A folder's JPEG images, and how many of them a rank must decode from the top to reach rows
/// further down (no restart marker begins an MCU row, or progressive): with the image split along
/// H, a rank's decode time falls as 1/sp only for the others. `tessera images add-restarts` (and
/// data::add_jpeg_restarts) adds the markers without changing a pixel.
struct JpegAccess {
  std::int64_t jpegs = 0;
  std::int64_t from_top = 0;
};
JpegAccess image_folder_jpeg_access(const Dataset& dataset);

}  // namespace tessera::data
