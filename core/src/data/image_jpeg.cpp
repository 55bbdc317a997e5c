// JPEG region decoding with libjpeg-turbo (jpeg_crop_scanline, jpeg_skip_scanlines, DCT scaling,
// and a start at the restart marker above the region where the file has them), and the
// format-neutral entry points of image_decode.hpp (probe, the end-of-file check, dispatch). Every
// libjpeg call runs guarded (jpeg_codec.hpp: no owning object in a frame a longjmp skips).
#include <sys/stat.h>

// jpeglib.h uses size_t and FILE without including their headers.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "image_decode.hpp"
#include "image_jpeg_restart.hpp"
#include "jpeg_codec.hpp"
#include "tessera/core/error.hpp"

namespace tessera::data::internal {

namespace {

const char* const kFix = "; re-encode or remove the file";

/// Where a decode starts and what it reads: the (cropped) columns libjpeg produces, and the first
/// row it decodes.
struct JpegPlan {
  int x0 = 0, width = 0;  ///< columns [x0, x0 + width) of the scaled image come out of each row
  int first_row = 0;      ///< rows above are skipped without being decoded
};

// Cropping and skipping change what libjpeg's fancy upsampler sees at the cut: it replicates the
// edge chroma sample where a full decode would blend in the neighbour, so pixels next to a cut
// differ from the full decode. The cut is therefore made one iMCU (the upsampler's reach is one
// chroma sample, well inside an iMCU) outside the region on every side that is not an image edge,
// and the margin is decoded and dropped. A progressive JPEG is decoded in full width from row 0.
JpegPlan plan_jpeg(Decompressor& d, const Region& region) {
  jpeg_decompress_struct& c = d.cinfo;
  JpegPlan plan;
  plan.width = static_cast<int>(c.output_width);
  if (c.progressive_mode) return plan;
  const int imcu_w = c.max_h_samp_factor * c.min_DCT_scaled_size;
  const int imcu_h = c.max_v_samp_factor * c.min_DCT_scaled_size;
  const int want0 = std::max(0, region.col0 - imcu_w);
  const int want1 = std::min(plan.width, region.col1 + imcu_w);
  if (want1 - want0 < plan.width) {
    JDIMENSION x = static_cast<JDIMENSION>(want0), w = static_cast<JDIMENSION>(want1 - want0);
    d.run([&] { jpeg_crop_scanline(&c, &x, &w); });  // widens to iMCU boundaries
    plan.x0 = static_cast<int>(x);
    plan.width = static_cast<int>(w);
  }
  const int skip = std::max(0, region.row0 - imcu_h) / imcu_h * imcu_h;
  if (skip > 0) {
    JDIMENSION skipped = 0;
    d.run([&] { skipped = jpeg_skip_scanlines(&c, static_cast<JDIMENSION>(skip)); });
    plan.first_row = static_cast<int>(skipped);
  }
  return plan;
}

/// Reads rows [plan.first_row, region.row1) and keeps the region's part of each in `out`. Rows
/// of the full width land in `out` directly; others go through `scratch` (kBatch rows).
void read_jpeg_rows(Decompressor& d, const JpegPlan& plan, const Region& region, int channels,
                    std::uint8_t* out) {
  constexpr int kBatch = 16;
  const std::size_t stride = static_cast<std::size_t>(plan.width) * channels;
  const std::size_t keep = static_cast<std::size_t>(region.cols()) * channels;
  const std::size_t skip_cols = static_cast<std::size_t>(region.col0 - plan.x0) * channels;
  const bool direct = skip_cols == 0 && keep == stride;
  std::vector<std::uint8_t> scratch(stride * kBatch);
  int row = plan.first_row;
  while (row < region.row1) {
    JSAMPROW rows[kBatch];
    const int n = std::min(kBatch, region.row1 - row);
    for (int i = 0; i < n; ++i) {
      const int r = row + i;
      rows[i] = direct && r >= region.row0 ? out + static_cast<std::size_t>(r - region.row0) * keep
                                           : scratch.data() + static_cast<std::size_t>(i) * stride;
    }
    JDIMENSION got = 0;
    d.run([&] { got = jpeg_read_scanlines(&d.cinfo, rows, static_cast<JDIMENSION>(n)); });
    TESSERA_ASSERT(got > 0, "libjpeg returned no rows from a complete source");
    for (int i = 0; i < static_cast<int>(got); ++i) {
      const int r = row + i;
      if (direct || r < region.row0) continue;
      std::memcpy(out + static_cast<std::size_t>(r - region.row0) * keep, rows[i] + skip_cols,
                  keep);
    }
    row += static_cast<int>(got);
  }
}

}  // namespace

ImageInfo probe_jpeg_header(const std::uint8_t* head, std::size_t size, const std::string& name) {
  Decompressor d(name);
  d.run([&] {
    jpeg_mem_src(&d.cinfo, head, static_cast<unsigned long>(size));
    jpeg_read_header(&d.cinfo, TRUE);
  });
  ImageInfo info;
  info.format = ImageFormat::Jpeg;
  info.width = static_cast<int>(std::min<JDIMENSION>(d.cinfo.image_width, 1u << 30));
  info.height = static_cast<int>(std::min<JDIMENSION>(d.cinfo.image_height, 1u << 30));
  info.interlaced = d.cinfo.progressive_mode != 0;
  info.restart_rows = restart_layout(d.cinfo).row_step;
  switch (d.cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE:
      info.channels = 1;
      break;
    case JCS_YCbCr:
    case JCS_RGB:
      info.channels = 3;
      break;
    case JCS_CMYK:
    case JCS_YCCK:
      throw InvalidArgument(
          detail::cat("'", name, "' is a CMYK JPEG; tessera reads gray and RGB JPEGs only: ",
                      "convert it to RGB (e.g. with PIL: Image.open(f).convert('RGB').save(f))",
                      " or remove the file"));
    default:
      throw InvalidArgument(
          detail::cat("'", name, "' is a JPEG with ", d.cinfo.num_components,
                      " components in an unknown colour space; tessera reads gray and RGB",
                      " JPEGs only", kFix));
  }
  return info;
}

namespace {

std::vector<std::uint8_t> read_at(std::FILE* f, std::int64_t offset, std::size_t n,
                                  const std::string& path);

/// Sets what decode_jpeg() asks of libjpeg on a header it has read, and computes the output size.
void configure(Decompressor& d, const ImageInfo& info, int scale_denom) {
  jpeg_decompress_struct& c = d.cinfo;
  c.out_color_space = info.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  c.scale_num = 1;
  c.scale_denom = static_cast<unsigned int>(scale_denom);
  c.dct_method = JDCT_ISLOW;  // PIL's default, so the pixels match what PIL users expect
  d.run([&] { jpeg_calc_output_dimensions(&c); });
}

/// Decodes `region` with a decompressor whose header is read and configured.
DecodedRegion decode_configured(Decompressor& d, const ImageInfo& info, const Region& region,
                                const std::string& name) {
  jpeg_decompress_struct& c = d.cinfo;
  d.run([&] { jpeg_start_decompress(&c); });
  TESSERA_ASSERT(static_cast<int>(c.output_components) == info.channels, "JPEG output has ",
                 c.output_components, " components, expected ", info.channels);
  check_region(region, static_cast<int>(c.output_width), static_cast<int>(c.output_height), name);
  DecodedRegion out;
  out.region = region;
  out.channels = info.channels;
  out.bit_depth = 8;
  out.u8.resize(static_cast<std::size_t>(region.rows()) * region.cols() * info.channels);
  const JpegPlan plan = plan_jpeg(d, region);
  read_jpeg_rows(d, plan, region, info.channels, out.u8.data());
  // Rows read, at the width libjpeg produced them (skipped rows are entropy-decoded only).
  out.pixels_decoded = static_cast<std::int64_t>(region.row1 - plan.first_row) * plan.width;
  return out;
}

/// MCU rows [first, end) to decode from a restart marker for output `region`, one MCU row of
/// margin kept on either side (the chroma upsampler's context); first == 0 when starting at the
/// top is as good (no restart markers, none that begin a row above the region, a progressive file).
struct RestartCut {
  int first = 0, end = 0;
};

RestartCut restart_cut(const RestartLayout& l, const jpeg_decompress_struct& c,
                       const Region& region) {
  if (l.row_step == 0) return {};
  // Output rows per MCU row at this scale (min_DCT_scaled_size: libjpeg-turbo's DCT scaling).
  const int rows = c.max_v_samp_factor * c.min_DCT_scaled_size;
  const int want_first = std::max(0, region.row0 / rows - 1);
  const int want_end = std::min(l.mcu_rows, (region.row1 - 1) / rows + 2);
  RestartCut cut;
  cut.first = want_first / l.row_step * l.row_step;
  cut.end = std::min(l.mcu_rows, (want_end + l.row_step - 1) / l.row_step * l.row_step);
  return cut;
}

/// The JPEG of MCU rows [cut.first, cut.end) cut out of the source, and the bytes read from the
/// file to make it; empty bytes when the file's markers are not where its header says.
struct RestartPart {
  std::vector<std::uint8_t> bytes;
  std::int64_t file_bytes_read = 0;
};

RestartPart restart_part(const ImageSource& src, const RestartLayout& layout, const RestartCut& cut,
                         int image_height) {
  RestartPart part;
  std::shared_ptr<const RestartIndex> index =
      src.restarts != nullptr ? src.restarts->get() : nullptr;
  std::vector<std::uint8_t> whole;  // the file, read when it has no index yet
  const std::uint8_t* data = src.data;
  if (index == nullptr || index->file_bytes != static_cast<std::int64_t>(src.size)) {
    if (src.file != nullptr) {
      whole = read_at(src.file, 0, src.size, src.name);
      data = whole.data();
      part.file_bytes_read = static_cast<std::int64_t>(src.size);
    }
    index = std::make_shared<const RestartIndex>(index_restarts(data, src.size, layout));
    if (src.restarts != nullptr) src.restarts->set(index);
  }
  if (index->row_begin.empty()) return {};
  const RestartSpan span = restart_span(*index, layout, cut.first, cut.end);
  std::vector<std::uint8_t> header, segments;
  const std::uint8_t* head = data;
  const std::uint8_t* seg = data == nullptr ? nullptr : data + span.begin;
  if (data == nullptr) {  // a file with its index: read only the header and the segments
    header = read_at(src.file, 0, index->scan_start, src.name);
    segments =
        read_at(src.file, static_cast<std::int64_t>(span.begin), span.end - span.begin, src.name);
    head = header.data();
    seg = segments.data();
    part.file_bytes_read = static_cast<std::int64_t>(header.size() + segments.size());
  }
  part.bytes = restart_substream(head, *index, seg, span.end - span.begin, layout, image_height,
                                 cut.first, cut.end);
  return part;
}

}  // namespace

DecodedRegion decode_jpeg(const ImageSource& src, const ImageInfo& info, Region region,
                          DecodeMode mode, int scale_denom) {
  TESSERA_CHECK(scale_denom == 1 || scale_denom == 2 || scale_denom == 4 || scale_denom == 8,
                "decoding '", src.name, "': JPEG scale_denom must be 1, 2, 4 or 8, not ",
                scale_denom);
  check_mode(info, mode, src.name);
  Decompressor d(src.name);
  jpeg_decompress_struct& c = d.cinfo;
  d.run([&] {
    if (src.file != nullptr) {
      jpeg_stdio_src(&c, src.file);
    } else {
      jpeg_mem_src(&c, src.data, static_cast<unsigned long>(src.size));
    }
    jpeg_read_header(&c, TRUE);
  });
  check_unchanged(info, c.image_width, c.image_height, src.name);
  TESSERA_CHECK(c.jpeg_color_space != JCS_CMYK && c.jpeg_color_space != JCS_YCCK, "'", src.name,
                "' is a CMYK JPEG (probe it first: probe_image refuses it)");
  configure(d, info, scale_denom);
  check_region(region, static_cast<int>(c.output_width), static_cast<int>(c.output_height),
               src.name);

  // Below the top, start at the restart marker above the region where the file has them.
  const RestartLayout layout = restart_layout(c);
  const RestartCut cut = restart_cut(layout, c, region);
  if (cut.first > 0) {
    RestartPart part = restart_part(src, layout, cut, static_cast<int>(c.image_height));
    if (!part.bytes.empty()) {
      const int shift = cut.first * c.max_v_samp_factor * c.min_DCT_scaled_size;
      Decompressor p(src.name);
      p.run([&] {
        jpeg_mem_src(&p.cinfo, part.bytes.data(), static_cast<unsigned long>(part.bytes.size()));
        jpeg_read_header(&p.cinfo, TRUE);
      });
      configure(p, info, scale_denom);
      Region inner = region;
      inner.row0 -= shift;
      inner.row1 -= shift;
      DecodedRegion out = decode_configured(p, info, inner, src.name);
      out.region = region;
      out.bytes_read = part.file_bytes_read;
      return out;
    }
  }

  DecodedRegion out = decode_configured(d, info, region, src.name);
  const auto unread = static_cast<std::int64_t>(c.src->bytes_in_buffer);
  out.bytes_read = (src.file != nullptr ? static_cast<std::int64_t>(std::ftell(src.file))
                                        : static_cast<std::int64_t>(src.size)) -
                   unread;
  return out;
}

// ---- Format-neutral entry points ----

namespace {

constexpr std::size_t kHeadBytes = 64 * 1024;  // enough for the header of nearly every file
constexpr std::size_t kTailBytes = 32;
static_assert(kTailBytes >= kMaxTrailingPadding + 12, "the tail holds the padding and IEND");

const std::uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
const std::uint8_t kPngEnd[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};

bool is_padding(std::uint8_t b) {
  return b == 0 || b == ' ' || b == '\t' || b == '\r' || b == '\n';
}

ImageFormat sniff(const std::uint8_t* head, std::size_t size, const std::string& name) {
  TESSERA_CHECK(size > 0, "'", name,
                "' is empty (0 bytes); remove the file or write the image again");
  if (size >= 3 && head[0] == 0xff && head[1] == 0xd8 && head[2] == 0xff) return ImageFormat::Jpeg;
  if (size >= 8 && std::memcmp(head, kPngSignature, 8) == 0) return ImageFormat::Png;
  throw InvalidArgument(
      detail::cat("'", name, "' is not a JPEG or PNG file (its first bytes match neither",
                  " signature); convert it to JPEG or PNG or remove it from the folder"));
}

/// Whether the last bytes of a file (`tail`, its final `size` bytes) end the way `format` must.
bool ends_properly(ImageFormat format, const std::uint8_t* tail, std::size_t size) {
  std::size_t end = size;
  while (end > 0 && size - end < kMaxTrailingPadding && is_padding(tail[end - 1])) --end;
  if (format == ImageFormat::Jpeg)
    return end >= 2 && tail[end - 2] == 0xff && tail[end - 1] == 0xd9;
  return end >= 12 && std::memcmp(tail + end - 12, kPngEnd, 12) == 0;
}

/// The first and last bytes of a file, and its size: all a probe reads of most files.
struct FileEnds {
  const std::uint8_t* head = nullptr;
  std::size_t head_size = 0;
  const std::uint8_t* tail = nullptr;
  std::size_t tail_size = 0;
  std::int64_t file_bytes = 0;
};

/// The probe of a file from its ends; `whole` re-reads the entire file for a header that does not
/// fit in the head.
template <class Whole>
ImageInfo probe_parts(const FileEnds& ends, const std::string& name, Whole&& whole) {
  const std::uint8_t* head = ends.head;
  const std::size_t head_size = ends.head_size;
  const std::int64_t file_bytes = ends.file_bytes;
  const ImageFormat format = sniff(head, head_size, name);
  const bool jpeg = format == ImageFormat::Jpeg;
  TESSERA_CHECK(
      ends_properly(format, ends.tail, ends.tail_size), "'", name, "' is truncated or damaged: a ",
      jpeg ? "JPEG must end with the EOI marker FF D9" : "PNG must end with the IEND chunk",
      " (followed by at most ", kMaxTrailingPadding, " bytes of 0x00 or whitespace)", kFix);
  auto header = [&](const std::uint8_t* p, std::size_t n) {
    return jpeg ? probe_jpeg_header(p, n, name) : probe_png_header(p, n, name);
  };
  ImageInfo info;
  if (static_cast<std::int64_t>(head_size) == file_bytes) {
    info = header(head, head_size);
  } else {
    try {
      info = header(head, head_size);
    } catch (const InvalidArgument&) {
      const std::vector<std::uint8_t> all = whole();  // the header runs past the first bytes
      info = header(all.data(), all.size());
    }
  }
  TESSERA_CHECK(info.width > 0 && info.height > 0, "'", name, "' has a zero size (", info.width,
                " x ", info.height, ")", kFix);
  const std::int64_t pixels = static_cast<std::int64_t>(info.width) * info.height;
  TESSERA_CHECK(
      pixels <= kMaxImagePixels, "'", name, "' is ", info.width, " x ", info.height,
      " pixels, over tessera's limit of 2^28 (268435456) pixels; resize the image or remove it");
  info.file_bytes = file_bytes;
  return info;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

FilePtr open_image(const std::string& path, std::int64_t* bytes) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  TESSERA_CHECK(f != nullptr, "cannot open image '", path, "': ", std::strerror(errno));
  struct stat st {};
  TESSERA_CHECK(::fstat(::fileno(f.get()), &st) == 0 && S_ISREG(st.st_mode), "'", path,
                "' is not a regular file; remove it from the image folder");
  *bytes = static_cast<std::int64_t>(st.st_size);
  return f;
}

std::vector<std::uint8_t> read_at(std::FILE* f, std::int64_t offset, std::size_t n,
                                  const std::string& path) {
  std::vector<std::uint8_t> buf(n);
  const bool ok = std::fseek(f, static_cast<long>(offset), SEEK_SET) == 0 &&
                  std::fread(buf.data(), 1, n, f) == n;
  TESSERA_CHECK(ok, "reading '", path, "' failed (", n, " bytes at offset ", offset,
                "); was the file changed while it was read?");
  return buf;
}

}  // namespace

void check_region(const Region& region, int width, int height, const std::string& name) {
  TESSERA_CHECK(region.row0 >= 0 && region.col0 >= 0 && region.row0 < region.row1 &&
                    region.col0 < region.col1 && region.row1 <= height && region.col1 <= width,
                "decoding '", name, "': region rows [", region.row0, ", ", region.row1,
                ") x columns [", region.col0, ", ", region.col1, ") is empty or outside the ",
                width, " x ", height,
                " (width x height) image; ask for a non-empty region inside it");
}

void check_mode(const ImageInfo& info, DecodeMode mode, const std::string& name) {
  TESSERA_CHECK(mode != DecodeMode::Index || info.palette || info.channels == 1, "'", name,
                "' has ", info.channels,
                " colour channels, but masks (Index decode) must be palette or gray",
                " images; save the mask as a palette or gray PNG");
}

void check_unchanged(const ImageInfo& info, std::int64_t width, std::int64_t height,
                     const std::string& name) {
  TESSERA_CHECK(width == info.width && height == info.height, "'", name, "' is now ", width, " x ",
                height, " but was ", info.width, " x ", info.height,
                " when probed; was the file replaced? Probe it again");
}

ImageInfo probe_image_memory(const std::uint8_t* data, std::size_t size, const std::string& name) {
  const std::size_t tail = std::min(size, kTailBytes);
  const FileEnds ends{data, size, data + size - tail, tail, static_cast<std::int64_t>(size)};
  return probe_parts(ends, name, [] { return std::vector<std::uint8_t>(); });
}

ImageInfo probe_image(const std::string& path) {
  std::int64_t bytes = 0;
  const FilePtr f = open_image(path, &bytes);
  const auto size = static_cast<std::size_t>(bytes);
  const std::vector<std::uint8_t> head = read_at(f.get(), 0, std::min(size, kHeadBytes), path);
  const std::size_t tail_size = std::min(size, kTailBytes);
  const std::vector<std::uint8_t> tail =
      read_at(f.get(), bytes - static_cast<std::int64_t>(tail_size), tail_size, path);
  const FileEnds ends{head.data(), head.size(), tail.data(), tail.size(), bytes};
  return probe_parts(ends, path, [&] { return read_at(f.get(), 0, size, path); });
}

DecodedRegion decode_region(const std::string& path, const ImageInfo& info, Region region,
                            DecodeMode mode, int scale_denom, RestartSlot* slot) {
  std::int64_t bytes = 0;
  const FilePtr f = open_image(path, &bytes);
  ImageSource src;
  src.file = f.get();
  src.size = static_cast<std::size_t>(bytes);
  src.name = path;
  src.restarts = slot;
  return info.format == ImageFormat::Jpeg ? decode_jpeg(src, info, region, mode, scale_denom)
                                          : decode_png(src, info, region, mode, scale_denom);
}

DecodedRegion decode_region_memory(const std::uint8_t* data, std::size_t size,
                                   const std::string& name, const ImageInfo& info, Region region,
                                   DecodeMode mode, int scale_denom) {
  ImageSource src;
  src.data = data;
  src.size = size;
  src.name = name;
  return info.format == ImageFormat::Jpeg ? decode_jpeg(src, info, region, mode, scale_denom)
                                          : decode_png(src, info, region, mode, scale_denom);
}

}  // namespace tessera::data::internal
