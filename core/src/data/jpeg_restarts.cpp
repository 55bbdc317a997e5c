// Restart markers in JPEGs (tessera/data/jpeg_restarts.hpp): reading what a header says, and
// adding markers losslessly with libjpeg's transcoding API (jpeg_read_coefficients and
// jpeg_write_coefficients, as jpegtran does).
#include "tessera/data/jpeg_restarts.hpp"

#include <cerrno>
#include <cstring>
#include <string_view>

#include "image_decode.hpp"
#include "image_jpeg_restart.hpp"
#include "jpeg_codec.hpp"
#include "tessera/core/file_io.hpp"

namespace tessera::data {

namespace {

using internal::Compressor;
using internal::Decompressor;

JpegRestarts restarts_of(const jpeg_decompress_struct& c) {
  const internal::RestartLayout l = internal::restart_layout(c);
  JpegRestarts r;
  r.sequential = !c.progressive_mode && !c.arith_code && c.comps_in_scan == c.num_components;
  r.interval = static_cast<int>(c.restart_interval);
  r.mcus_per_row = l.mcus_per_row;
  r.mcu_rows = l.mcu_rows;
  r.row_step = l.row_step;
  return r;
}

/// Whether a saved marker is one the compressor writes itself (the JFIF APP0 and Adobe APP14
/// headers), which would be written twice if copied.
bool written_by_library(const jpeg_compress_struct& c, const jpeg_marker_struct& m) {
  auto starts = [&](const char* tag) {
    const std::size_t n = std::strlen(tag);
    return m.data_length >= n && std::memcmp(m.data, tag, n) == 0;
  };
  return (c.write_JFIF_header && m.marker == JPEG_APP0 && starts("JFIF")) ||
         (c.write_Adobe_marker && m.marker == JPEG_APP0 + 14 && starts("Adobe"));
}

/// The full decode of a JPEG in memory (every pixel, as the image folders decode it).
std::vector<std::uint8_t> pixels(const std::uint8_t* data, std::size_t size,
                                 const std::string& name) {
  const internal::ImageInfo info = internal::probe_image_memory(data, size, name);
  return internal::decode_region_memory(data, size, name, info, {0, info.height, 0, info.width},
                                        internal::DecodeMode::Color)
      .u8;
}

}  // namespace

JpegRestarts jpeg_restarts(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  TESSERA_CHECK(f != nullptr, "cannot open the JPEG '", path, "': ", std::strerror(errno));
  JpegRestarts r;
  try {
    Decompressor d(path);
    d.run([&] {
      jpeg_stdio_src(&d.cinfo, f);
      jpeg_read_header(&d.cinfo, TRUE);
    });
    r = restarts_of(d.cinfo);
  } catch (...) {
    std::fclose(f);
    throw;
  }
  std::fclose(f);
  return r;
}

RestartRewrite add_jpeg_restarts(const std::string& in, const std::string& out, int rows) {
  TESSERA_CHECK(
      rows >= 1 && rows <= 65535, "a restart marker every ", rows,
      " MCU rows: give 1 to 65535 (1: a rank starts at most one MCU row above its shard)");
  const std::string source = core::read_file(in);
  const auto* src = reinterpret_cast<const std::uint8_t*>(source.data());
  const internal::ImageInfo info = internal::probe_image_memory(src, source.size(), in);
  TESSERA_CHECK(info.format == internal::ImageFormat::Jpeg, "'", in,
                "' is a PNG, not a JPEG: restart markers are a JPEG's (copy PNGs unchanged)");

  RestartRewrite result;
  result.bytes_in = static_cast<std::int64_t>(source.size());
  result.was_progressive = info.interlaced;
  Decompressor d(in);
  Compressor c(out);
  d.run([&] {
    jpeg_mem_src(&d.cinfo, src, static_cast<unsigned long>(source.size()));
    jpeg_save_markers(&d.cinfo, JPEG_COM, 0xffff);
    for (int m = 0; m < 16; ++m) jpeg_save_markers(&d.cinfo, JPEG_APP0 + m, 0xffff);
    jpeg_read_header(&d.cinfo, TRUE);
  });
  jvirt_barray_ptr* coefficients = nullptr;
  d.run([&] { coefficients = jpeg_read_coefficients(&d.cinfo); });
  c.run([&] {
    jpeg_mem_dest(&c.cinfo, &c.buffer, &c.size);
    jpeg_copy_critical_parameters(&d.cinfo, &c.cinfo);
    c.cinfo.restart_in_rows = rows;
    c.cinfo.optimize_coding = TRUE;
    jpeg_write_coefficients(&c.cinfo, coefficients);
    for (jpeg_saved_marker_ptr m = d.cinfo.marker_list; m != nullptr; m = m->next) {
      if (!written_by_library(c.cinfo, *m))
        jpeg_write_marker(&c.cinfo, m->marker, m->data, m->data_length);
    }
    jpeg_finish_compress(&c.cinfo);
  });
  d.run([&] { jpeg_finish_decompress(&d.cinfo); });

  const std::string_view written(reinterpret_cast<const char*>(c.buffer), c.size);
  TESSERA_CHECK(pixels(c.buffer, c.size, out) == pixels(src, source.size(), in),
                "adding restart markers to '", in,
                "' changed its pixels (a bug: the coefficients are copied); '", out,
                "' was not written");
  core::write_file_atomic(out, written);
  TESSERA_CHECK(core::read_file(out) == written, "'", out,
                "' does not read back as written; check the disk and write it again");
  result.bytes_out = static_cast<std::int64_t>(c.size);
  return result;
}

}  // namespace tessera::data
