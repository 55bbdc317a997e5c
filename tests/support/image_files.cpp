// PNG and JPEG writers for tests (libpng and libjpeg-turbo write APIs) and the test picture.
// Both libraries report errors by longjmp; the guarded steps hold no owning objects.
#include "support/image_files.hpp"

// jpeglib.h uses size_t and FILE without including their headers.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <memory>
#include <stdexcept>

namespace tessera::test {

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

FilePtr create(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "wb"));
  if (!f) throw std::runtime_error("cannot create " + path);
  return f;
}

int png_color_type(const PngSpec& spec) {
  if (!spec.palette.empty()) return PNG_COLOR_TYPE_PALETTE;
  switch (spec.channels) {
    case 1:
      return PNG_COLOR_TYPE_GRAY;
    case 2:
      return PNG_COLOR_TYPE_GRAY_ALPHA;
    case 3:
      return PNG_COLOR_TYPE_RGB;
    case 4:
      return PNG_COLOR_TYPE_RGB_ALPHA;
    default:
      throw std::runtime_error("write_png: channels must be 1 to 4");
  }
}

/// The rows as libpng takes them with png_set_packing: one byte per sample below 8 bits, two
/// big-endian bytes per sample at 16.
std::vector<std::uint8_t> png_bytes(const PngSpec& spec,
                                    const std::vector<std::uint16_t>& samples) {
  const int bytes = spec.bit_depth == 16 ? 2 : 1;
  std::vector<std::uint8_t> out(samples.size() * bytes);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (samples[i] >= (1u << spec.bit_depth))
      throw std::runtime_error("write_png: sample over the bit depth");
    if (bytes == 2) {
      out[2 * i] = static_cast<std::uint8_t>(samples[i] >> 8);
      out[2 * i + 1] = static_cast<std::uint8_t>(samples[i] & 0xff);
    } else {
      out[i] = static_cast<std::uint8_t>(samples[i]);
    }
  }
  return out;
}

[[noreturn]] void png_fail(png_structp png, png_const_charp) { png_longjmp(png, 1); }

bool write_png_rows(png_structp png, png_infop info, const PngSpec& spec, std::FILE* f,
                    png_bytep* rows, png_colorp palette) {
  if (setjmp(png_jmpbuf(png)) != 0) return false;
  png_init_io(png, f);
  png_set_IHDR(png, info, spec.width, spec.height, spec.bit_depth, png_color_type(spec),
               spec.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (palette != nullptr) png_set_PLTE(png, info, palette, static_cast<int>(spec.palette.size()));
  png_write_info(png, info);
  if (spec.bit_depth < 8) png_set_packing(png);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  return true;
}

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  std::longjmp(*static_cast<std::jmp_buf*>(cinfo->client_data), 1);
}

bool write_jpeg_rows(jpeg_compress_struct& c, const JpegSpec& spec, const JpegExtras& extras,
                     std::FILE* f, JSAMPROW* rows) {
  if (setjmp(*static_cast<std::jmp_buf*>(c.client_data)) != 0) return false;
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = static_cast<JDIMENSION>(spec.width);
  c.image_height = static_cast<JDIMENSION>(spec.height);
  c.input_components = spec.channels;
  c.in_color_space = spec.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, spec.quality, TRUE);
  if (spec.channels == 3) {
    c.comp_info[0].h_samp_factor = spec.subsampling == 444 ? 1 : 2;
    c.comp_info[0].v_samp_factor = spec.subsampling == 420 ? 2 : 1;
    for (int k = 1; k < 3; ++k) c.comp_info[k].h_samp_factor = c.comp_info[k].v_samp_factor = 1;
  }
  if (spec.progressive) jpeg_simple_progression(&c);
  c.restart_in_rows = extras.restart_rows;
  c.restart_interval = static_cast<unsigned int>(extras.restart_mcus);
  jpeg_start_compress(&c, TRUE);
  if (!extras.comment.empty()) {
    jpeg_write_marker(&c, JPEG_COM, reinterpret_cast<const JOCTET*>(extras.comment.data()),
                      static_cast<unsigned int>(extras.comment.size()));
  }
  jpeg_write_scanlines(&c, rows, static_cast<JDIMENSION>(spec.height));
  jpeg_finish_compress(&c);
  return true;
}

}  // namespace

void write_png(const std::string& path, const PngSpec& spec,
               const std::vector<std::uint16_t>& samples) {
  const int channels = spec.palette.empty() ? spec.channels : 1;
  const std::size_t row_samples = static_cast<std::size_t>(spec.width) * channels;
  if (samples.size() != row_samples * spec.height)
    throw std::runtime_error("write_png: wrong sample count");
  std::vector<std::uint8_t> bytes = png_bytes(spec, samples);
  const std::size_t stride = row_samples * (spec.bit_depth == 16 ? 2 : 1);
  std::vector<png_bytep> rows(spec.height);
  for (int y = 0; y < spec.height; ++y) rows[y] = bytes.data() + y * stride;
  std::vector<png_color> palette;
  for (const auto& c : spec.palette) palette.push_back(png_color{c[0], c[1], c[2]});
  FilePtr f = create(path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, png_fail, nullptr);
  png_infop info = png != nullptr ? png_create_info_struct(png) : nullptr;
  const bool ok = info != nullptr && write_png_rows(png, info, spec, f.get(), rows.data(),
                                                    palette.empty() ? nullptr : palette.data());
  png_destroy_write_struct(&png, &info);
  if (!ok || std::fflush(f.get()) != 0) throw std::runtime_error("write_png failed for " + path);
}

void write_jpeg(const std::string& path, const JpegSpec& spec,
                const std::vector<std::uint8_t>& samples, const JpegExtras& extras) {
  if (spec.channels != 1 && spec.channels != 3)
    throw std::runtime_error("write_jpeg: channels must be 1 or 3");
  const std::size_t stride = static_cast<std::size_t>(spec.width) * spec.channels;
  if (samples.size() != stride * spec.height)
    throw std::runtime_error("write_jpeg: wrong sample count");
  std::vector<JSAMPROW> rows(spec.height);
  for (int y = 0; y < spec.height; ++y) rows[y] = const_cast<JSAMPLE*>(samples.data() + y * stride);
  FilePtr f = create(path);
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  std::jmp_buf jump;
  c.err = jpeg_std_error(&err);
  err.error_exit = jpeg_fail;
  c.client_data = &jump;
  const bool ok = write_jpeg_rows(c, spec, extras, f.get(), rows.data());
  jpeg_destroy_compress(&c);
  if (!ok || std::fflush(f.get()) != 0) throw std::runtime_error("write_jpeg failed for " + path);
}

std::vector<std::uint16_t> test_picture(int width, int height, int channels, int bit_depth,
                                        std::uint64_t seed) {
  // Per channel, a triangle wave along a slanted direction (smooth, so JPEG keeps it well) plus a
  // few vertical stripes (sharp edges, so region borders and subsampling are exercised).
  const int max = (1 << bit_depth) - 1;
  std::vector<std::uint16_t> out(static_cast<std::size_t>(width) * height * channels);
  for (int c = 0; c < channels; ++c) {
    const std::uint64_t h =
        seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(c) * 0xbf58476d1ce4e5b9ull;
    const int kx = 1 + static_cast<int>((h >> 8) % 2), ky = 1 + static_cast<int>((h >> 16) % 2);
    const int period = 64 + static_cast<int>((h >> 24) % 64),
              offset = static_cast<int>((h >> 32) % 97);
    const int stripe = 9 + static_cast<int>((h >> 40) % 7);
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        const int t = (x * kx + y * ky + offset) % (2 * period);
        const double tri = (t < period ? t : 2 * period - t) / static_cast<double>(period);
        double v = 0.1 + 0.75 * tri + ((x / stripe) % 4 == 1 ? 0.15 : 0.0);
        out[(static_cast<std::size_t>(y) * width + x) * channels + c] =
            static_cast<std::uint16_t>(std::min(max, static_cast<int>(v * max + 0.5)));
      }
    }
  }
  return out;
}

}  // namespace tessera::test
