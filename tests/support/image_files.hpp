// Test support: writes PNG and JPEG files with libpng and libjpeg-turbo (the encoders, which the
// datasets under test do not use), so tests build image folders of known pixels.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::test {

struct PngSpec {
  int width = 0, height = 0;
  int channels = 3;   ///< 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA; with a palette: 1 (the indices)
  int bit_depth = 8;  ///< 8 or 16 (palette: 8)
  bool interlaced = false;                           ///< Adam7
  std::vector<std::array<std::uint8_t, 3>> palette;  ///< non-empty: a palette PNG of indices
};

/// Writes `samples` (height × width × channels, row-major, interleaved; values below 2^bit_depth)
/// as a PNG. Throws std::runtime_error on failure.
void write_png(const std::string& path, const PngSpec& spec,
               const std::vector<std::uint16_t>& samples);

struct JpegSpec {
  int width = 0, height = 0;
  int channels = 3;  ///< 1 gray or 3 RGB
  int quality = 95;
  int subsampling = 420;  ///< chroma: 444, 422 or 420
  bool progressive = false;
};

/// What write_jpeg() adds beyond its defaults.
struct JpegExtras {
  int restart_rows = 0;  ///< a restart marker every this many MCU rows (0: see restart_mcus)
  int restart_mcus = 0;  ///< ... or every this many MCUs (both 0: no restart markers)
  std::string comment;   ///< non-empty: written as a COM marker
};

/// Writes `samples` (height × width × channels, 8-bit) as a JPEG. Throws std::runtime_error.
void write_jpeg(const std::string& path, const JpegSpec& spec,
                const std::vector<std::uint8_t>& samples, const JpegExtras& extras = {});

/// A smooth, deterministic test picture (gradients and stripes, different per channel and per
/// `seed`): height × width × channels samples below 2^bit_depth.
std::vector<std::uint16_t> test_picture(int width, int height, int channels, int bit_depth,
                                        std::uint64_t seed);

}  // namespace tessera::test
