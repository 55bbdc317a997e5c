// bench_loader's test images: a folder of JPEGs in the classification layout (one folder per
// class), written with libjpeg from a procedural picture with the structure of a photograph —
// smooth shading, edges at several scales and fine texture — so that decoding costs what it costs
// on real photographs (flat colour decodes unrealistically fast: its blocks are nearly all zeros).
#pragma once

#include <cstdint>
#include <string>

namespace tessera::bench {

struct ImageSetSpec {
  int count = 16;  ///< images, spread round-robin over `classes` class folders
  int classes = 4;
  int height = 1024, width = 2048;
  int quality = 90;  ///< libjpeg quality; chroma always 4:2:0 (libjpeg's default)
  std::uint64_t seed = 0;
};

/// What write_image_set() wrote.
struct ImageSet {
  std::string folder;
  std::int64_t bytes = 0;  ///< sum of the files' sizes
};

/// Writes the images under `folder` (created; class folders c0, c1, ...; files img_NNN.jpg).
/// Throws std::runtime_error naming the file when a folder or file cannot be written.
ImageSet write_image_set(const std::string& folder, const ImageSetSpec& spec);

}  // namespace tessera::bench
