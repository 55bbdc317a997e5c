// Internal to the image datasets: JPEG (libjpeg-turbo) and PNG (libpng) headers and region
// decoding. A region is a rectangle of rows and columns; the decoders produce only what the format
// lets them skip least of, and every pixel of a region equals the same pixel of a full decode.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::data::internal {

enum class ImageFormat { Jpeg, Png };

/// What a file's header says, and its size on disk.
struct ImageInfo {
  ImageFormat format = ImageFormat::Jpeg;
  int width = 0, height = 0;
  /// Channels as decoded in DecodeMode::Color: 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA (a palette
  /// PNG gives 3 or 4, a CMYK JPEG is refused at probe).
  int channels = 0;
  int bit_depth = 8;        ///< 8 or 16 (PNG 1/2/4-bit gray and palettes decode to 8)
  bool palette = false;     ///< a PNG with a palette (masks: its indices are the values)
  bool interlaced = false;  ///< progressive JPEG or Adam7 PNG (decoded in full, then cut)
  /// JPEG: a restart segment begins an MCU row every this many MCU rows, so a region below the
  /// top is decoded from the marker above it (0: decoded from the top; image_jpeg_restart.hpp).
  int restart_rows = 0;
  std::int64_t file_bytes = 0;
};

/// Reads `path`'s header and checks the file's end (JPEG: the EOI marker; PNG: the IEND chunk),
/// so a truncated file is found without decoding it. Throws InvalidArgument naming the path and
/// what is wrong (not a JPEG or PNG, truncated, unsupported colour space, zero size, over 2^28
/// pixels).
ImageInfo probe_image(const std::string& path);

/// Rows [row0, row1) and columns [col0, col1) of an image, in its (scaled) pixels.
struct Region {
  int row0 = 0, row1 = 0, col0 = 0, col1 = 0;
  int rows() const { return row1 - row0; }
  int cols() const { return col1 - col0; }
};

enum class DecodeMode {
  Color,  ///< pixel values; palettes expanded to RGB(A), gray stays gray
  Index,  ///< masks: palette indices or gray values, one channel; an RGB(A) image is refused
};

/// A decoded region: rows × cols × channels samples, row-major, interleaved channels. 8-bit
/// images fill `u8`, 16-bit ones `u16` (big-endian PNG samples already swapped).
struct DecodedRegion {
  Region region;
  int channels = 0;
  int bit_depth = 8;
  std::vector<std::uint8_t> u8;
  std::vector<std::uint16_t> u16;
  std::int64_t bytes_read = 0;      ///< bytes of the file read to decode the region
  std::int64_t pixels_decoded = 0;  ///< pixels it produced, including what it had to decode and
                                    ///< drop (iMCU padding, PNG rows above the region)
  /// Sample (row, col, channel) of the region, as an integer (0..255 or 0..65535).
  int at(int row, int col, int c) const {
    const std::size_t i = (static_cast<std::size_t>(row) * region.cols() + col) * channels + c;
    return bit_depth == 16 ? u16[i] : u8[i];
  }
};

struct RestartIndex;  // image_jpeg_restart.hpp

/// Where one JPEG file's restart segments lie, kept between decodes of it (an image folder keeps
/// one per JPEG): a region below the top then reads only the file's header and its own segments,
/// where without it every such decode reads and walks the whole file. Thread-safe.
class RestartSlot {
 public:
  std::shared_ptr<const RestartIndex> get() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return index_;
  }
  void set(std::shared_ptr<const RestartIndex> index) {
    const std::lock_guard<std::mutex> lock(mutex_);
    index_ = std::move(index);
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const RestartIndex> index_;
};

/// Decodes `region` of `path` (probed as `info`). JPEG: from the restart marker above the region
/// where the file has markers that begin MCU rows (image_jpeg_restart.hpp; `slot`, when given,
/// keeps where they are), else libjpeg-turbo's jpeg_skip_scanlines; jpeg_crop_scanline for the
/// columns; with `scale_denom` 2, 4 or 8 the image is decoded at that fraction of its size
/// (ceil(width / denom) × ceil(height / denom)) and `region` is in those pixels. PNG: rows are
/// decoded in order up to row1 and only the region kept (scale_denom must be 1); an interlaced
/// PNG is decoded in full. Throws InvalidArgument naming the path for a corrupt or truncated
/// stream (libjpeg warnings about corrupt data count as errors), a region outside the image, or
/// an Index decode of a colour image.
DecodedRegion decode_region(const std::string& path, const ImageInfo& info, Region region,
                            DecodeMode mode, int scale_denom = 1, RestartSlot* slot = nullptr);

/// The same from a buffer in memory (the fuzzer's entry; `name` stands for the path in
/// messages). probe_image_memory() is probe_image() of a buffer.
ImageInfo probe_image_memory(const std::uint8_t* data, std::size_t size, const std::string& name);
DecodedRegion decode_region_memory(const std::uint8_t* data, std::size_t size,
                                   const std::string& name, const ImageInfo& info, Region region,
                                   DecodeMode mode, int scale_denom = 1);

// ---- Shared by the two decoders (image_jpeg.cpp also holds the format-neutral entry points) ----

/// Images over this many pixels are refused at probe (2^28: a 16384 × 16384 picture), so a
/// corrupt or hostile header cannot ask for gigabytes.
constexpr std::int64_t kMaxImagePixels = std::int64_t{1} << 28;

/// probe_image() accepts at most this many bytes of 0x00 or ASCII whitespace after a JPEG's EOI
/// marker or a PNG's IEND chunk (some writers pad files so; the bytes carry nothing). Anything
/// else after the end marker, or a missing marker, is refused as a truncated or damaged file.
constexpr std::size_t kMaxTrailingPadding = 16;

/// Where a decoder reads its compressed bytes: a buffer, or an open file read as the decode goes
/// (so a region near the top of a large image reads only the start of the file).
struct ImageSource {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;       ///< the buffer's bytes, or the file's
  std::FILE* file = nullptr;  ///< when set, read from here (positioned at the file's start)
  std::string name;           ///< the path, or a memory buffer's stand-in, for messages
  RestartSlot* restarts = nullptr;  ///< JPEG: where its restart segments lie, kept between decodes
};

/// The header fields of a JPEG or PNG whose first `size` bytes are `head` (format, size, channels,
/// depth, palette, interlace; not file_bytes). Throws InvalidArgument naming `name`.
ImageInfo probe_jpeg_header(const std::uint8_t* head, std::size_t size, const std::string& name);
ImageInfo probe_png_header(const std::uint8_t* head, std::size_t size, const std::string& name);

DecodedRegion decode_jpeg(const ImageSource& src, const ImageInfo& info, Region region,
                          DecodeMode mode, int scale_denom);
DecodedRegion decode_png(const ImageSource& src, const ImageInfo& info, Region region,
                         DecodeMode mode, int scale_denom);

/// Throws InvalidArgument unless `region` is non-empty and lies inside width × height.
void check_region(const Region& region, int width, int height, const std::string& name);

/// Throws InvalidArgument for an Index decode of an image that is not gray or a palette.
void check_mode(const ImageInfo& info, DecodeMode mode, const std::string& name);

/// Throws InvalidArgument unless the header read by a decoder (width, height) is what probe saw.
void check_unchanged(const ImageInfo& info, std::int64_t width, std::int64_t height,
                     const std::string& name);

}  // namespace tessera::data::internal
