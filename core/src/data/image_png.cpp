// PNG region decoding with libpng: rows are decoded in order up to the region's last row, which is
// all PNG allows (each row is filtered against the one above, in one deflate stream), and only the
// region is kept; an Adam7-interlaced image is decoded in full, then cut.
//
// libpng reports errors through a callback that must not return: it longjmps back to the setjmp in
// guarded(). Nothing that owns memory may live in the frames a longjmp skips, so every buffer is
// allocated before a guarded step and the steps hold plain pointers only.
#include <png.h>

#include <algorithm>
#include <bit>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "image_decode.hpp"
#include "tessera/core/error.hpp"

namespace tessera::data::internal {

namespace {

/// Owns one libpng read struct and feeds it from an ImageSource, counting the bytes it takes.
class PngReader {
 public:
  explicit PngReader(const ImageSource& src) : src_(src) {
    png_ = png_create_read_struct(PNG_LIBPNG_VER_STRING, this, on_error, on_warning);
    if (png_ != nullptr) info_ = png_create_info_struct(png_);
    TESSERA_CHECK(png_ != nullptr && info_ != nullptr, "decoding '", src.name,
                  "': libpng could not allocate");
    png_set_read_fn(png_, this, read_bytes);
  }
  ~PngReader() { png_destroy_read_struct(&png_, &info_, nullptr); }
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;

  /// Runs `step` (libpng calls on plain pointers); a libpng error becomes an InvalidArgument.
  template <class Step>
  void run(Step&& step) {
    if (!guarded(step)) {
      throw InvalidArgument(detail::cat("'", src_.name, "' is not a readable PNG: ", message_,
                                        "; re-encode or remove the file"));
    }
  }

  png_structp png() const { return png_; }
  png_infop info() const { return info_; }
  std::int64_t consumed() const { return consumed_; }

 private:
  template <class Step>
  bool guarded(Step& step) {
    if (setjmp(png_jmpbuf(png_)) != 0) return false;
    step();
    return true;
  }

  [[noreturn]] static void on_error(png_structp png, png_const_charp msg) {
    auto* self = static_cast<PngReader*>(png_get_error_ptr(png));
    std::snprintf(self->message_, sizeof self->message_, "%s", msg);
    png_longjmp(png, 1);
  }
  // Warnings are about ancillary chunks (a bad sRGB profile, a damaged text chunk), which libpng
  // drops; the pixels are intact, and library code never prints.
  static void on_warning(png_structp, png_const_charp) {}

  static void read_bytes(png_structp png, png_bytep out, png_size_t n) {
    auto* self = static_cast<PngReader*>(png_get_io_ptr(png));
    const ImageSource& src = self->src_;
    if (src.file != nullptr) {
      if (std::fread(out, 1, n, src.file) != n)
        png_error(png, "unexpected end of file (truncated)");
    } else {
      if (n > src.size - self->pos_) png_error(png, "unexpected end of data (truncated)");
      std::memcpy(out, src.data + self->pos_, n);
      self->pos_ += n;
    }
    self->consumed_ += static_cast<std::int64_t>(n);
  }

  const ImageSource& src_;
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
  std::size_t pos_ = 0;
  std::int64_t consumed_ = 0;
  char message_[256] = {};
};

/// The transforms that give `mode`'s samples: palettes expanded to RGB (tRNS to alpha) or kept as
/// indices, 1/2/4-bit samples widened to bytes (scaled to 0..255 for Color gray, unscaled for
/// Index), 16-bit samples in host order.
void set_transforms(png_structp png, png_infop info, DecodeMode mode) {
  const int type = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (mode == DecodeMode::Color && type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (mode == DecodeMode::Color && type == PNG_COLOR_TYPE_GRAY && depth < 8)
    png_set_expand_gray_1_2_4_to_8(png);
  if (depth < 8) png_set_packing(png);
  if (depth == 16 && std::endian::native == std::endian::little) png_set_swap(png);
  if (png_get_interlace_type(png, info) != PNG_INTERLACE_NONE)
    (void)png_set_interlace_handling(png);
  png_read_update_info(png, info);
}

/// Bytes of one decoded row (`stride`), and of the region's part of it: `keep` bytes from `skip`.
struct RowCut {
  std::size_t stride = 0, skip = 0, keep = 0;
};

/// Copies the region's part of a whole decoded image (`image`, stride bytes a row) to `out`.
void cut_region(const std::uint8_t* image, const Region& region, const RowCut& cut,
                std::uint8_t* out) {
  for (int r = region.row0; r < region.row1; ++r) {
    std::memcpy(out + static_cast<std::size_t>(r - region.row0) * cut.keep,
                image + static_cast<std::size_t>(r) * cut.stride + cut.skip, cut.keep);
  }
}

}  // namespace

ImageInfo probe_png_header(const std::uint8_t* head, std::size_t size, const std::string& name) {
  ImageSource src;
  src.data = head;
  src.size = size;
  src.name = name;
  PngReader r(src);
  r.run([&] { png_read_info(r.png(), r.info()); });
  ImageInfo info;
  info.format = ImageFormat::Png;
  info.width =
      static_cast<int>(std::min<png_uint_32>(png_get_image_width(r.png(), r.info()), 1u << 30));
  info.height =
      static_cast<int>(std::min<png_uint_32>(png_get_image_height(r.png(), r.info()), 1u << 30));
  info.bit_depth = png_get_bit_depth(r.png(), r.info()) == 16 ? 16 : 8;
  info.interlaced = png_get_interlace_type(r.png(), r.info()) != PNG_INTERLACE_NONE;
  switch (png_get_color_type(r.png(), r.info())) {
    case PNG_COLOR_TYPE_GRAY:
      info.channels = 1;
      break;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      info.channels = 2;
      break;
    case PNG_COLOR_TYPE_RGB:
      info.channels = 3;
      break;
    case PNG_COLOR_TYPE_RGB_ALPHA:
      info.channels = 4;
      break;
    default:  // PNG_COLOR_TYPE_PALETTE (libpng has refused every other value)
      info.palette = true;
      info.channels = png_get_valid(r.png(), r.info(), PNG_INFO_tRNS) != 0 ? 4 : 3;
  }
  return info;
}

DecodedRegion decode_png(const ImageSource& src, const ImageInfo& info, Region region,
                         DecodeMode mode, int scale_denom) {
  TESSERA_CHECK(scale_denom == 1, "decoding '", src.name,
                "': a PNG decodes at full size only (scale_denom 1, not ", scale_denom, ")");
  check_mode(info, mode, src.name);
  check_region(region, info.width, info.height, src.name);
  PngReader r(src);
  r.run([&] { png_read_info(r.png(), r.info()); });
  check_unchanged(info, png_get_image_width(r.png(), r.info()),
                  png_get_image_height(r.png(), r.info()), src.name);
  r.run([&] { set_transforms(r.png(), r.info(), mode); });
  const int channels = png_get_channels(r.png(), r.info());
  const int depth = png_get_bit_depth(r.png(), r.info());
  const int want_channels = mode == DecodeMode::Index ? 1 : info.channels;
  TESSERA_ASSERT(channels == want_channels && depth == info.bit_depth, "PNG rows have ", channels,
                 " channels of ", depth, " bits, expected ", want_channels, " of ", info.bit_depth);

  DecodedRegion out;
  out.region = region;
  out.channels = channels;
  out.bit_depth = depth;
  const int bytes = depth / 8;
  const std::size_t stride = static_cast<std::size_t>(info.width) * channels * bytes;
  TESSERA_ASSERT(png_get_rowbytes(r.png(), r.info()) == stride, "PNG row of ",
                 png_get_rowbytes(r.png(), r.info()), " bytes, expected ", stride);
  const std::size_t keep = static_cast<std::size_t>(region.cols()) * channels * bytes;
  const std::size_t skip = static_cast<std::size_t>(region.col0) * channels * bytes;
  const std::size_t samples = static_cast<std::size_t>(region.rows()) * region.cols() * channels;
  std::uint8_t* dst = nullptr;
  if (depth == 16) {
    out.u16.resize(samples);
    dst = reinterpret_cast<std::uint8_t*>(out.u16.data());
  } else {
    out.u8.resize(samples);
    dst = out.u8.data();
  }

  if (info.interlaced) {  // Adam7 spreads every row over the whole stream: decode all, then cut
    std::vector<std::uint8_t> image(stride * info.height);
    std::vector<png_bytep> rows(info.height);
    for (int y = 0; y < info.height; ++y) rows[y] = image.data() + y * stride;
    r.run([&] { png_read_image(r.png(), rows.data()); });
    cut_region(image.data(), region, RowCut{stride, skip, keep}, dst);
    out.pixels_decoded = static_cast<std::int64_t>(info.width) * info.height;
  } else {
    // Full-width regions decode straight into the output; others go through one scratch row.
    const bool direct = keep == stride;
    std::vector<std::uint8_t> scratch(stride);
    std::uint8_t* const scratch_row = scratch.data();
    r.run([&] {
      for (int y = 0; y < region.row1; ++y) {
        const bool in = y >= region.row0;
        png_bytep row =
            direct && in ? dst + static_cast<std::size_t>(y - region.row0) * keep : scratch_row;
        png_read_row(r.png(), row, nullptr);
        if (in && !direct)
          std::memcpy(dst + static_cast<std::size_t>(y - region.row0) * keep, row + skip, keep);
      }
    });
    out.pixels_decoded = static_cast<std::int64_t>(info.width) * region.row1;
  }
  out.bytes_read = r.consumed();
  return out;
}

}  // namespace tessera::data::internal
