// The JPEG and PNG region decoders (core/src/data/image_decode.hpp): PNG decodes to the written
// samples exactly, JPEG close to the written picture (and its DCT-scaled decodes close to a box
// downscale), every region equals the same rectangle of the full decode bit for bit, narrow
// regions decode fewer pixels, and each kind of bad file is refused with a message naming it.
// jpeglib.h uses size_t and FILE without including their headers.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "../../core/src/data/image_decode.hpp"
#include "support/image_files.hpp"
#include "support/test_utils.hpp"

using namespace tessera;
using Catch::Matchers::Contains;
using data::internal::DecodedRegion;
using data::internal::DecodeMode;
using data::internal::ImageInfo;
using data::internal::Region;
using test::error_of;
using test::read_bytes;

namespace {

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("tessera_image") {}
};

std::vector<std::uint8_t> to_u8(const std::vector<std::uint16_t>& v) {
  return {v.begin(), v.end()};
}

Region whole(int width, int height) { return Region{0, height, 0, width}; }

DecodedRegion decode(const std::string& path, Region region, DecodeMode mode = DecodeMode::Color,
                     int denom = 1) {
  return data::internal::decode_region(path, data::internal::probe_image(path), region, mode,
                                       denom);
}

/// Samples of `d` as ints, row-major interleaved.
std::vector<int> samples(const DecodedRegion& d) {
  std::vector<int> out;
  for (int r = 0; r < d.region.rows(); ++r)
    for (int c = 0; c < d.region.cols(); ++c)
      for (int k = 0; k < d.channels; ++k) out.push_back(d.at(r, c, k));
  return out;
}

/// The rectangle `region` of the full decode `full`, as ints (the independent reference cut).
std::vector<int> cut(const DecodedRegion& full, const Region& region) {
  std::vector<int> out;
  for (int r = region.row0; r < region.row1; ++r)
    for (int c = region.col0; c < region.col1; ++c)
      for (int k = 0; k < full.channels; ++k) out.push_back(full.at(r, c, k));
  return out;
}

/// Regions of a width × height image: the whole image, single pixels at the corners, the last row
/// and column, thin strips and random rectangles at odd offsets.
std::vector<Region> test_regions(int width, int height, std::uint64_t seed, int random_count) {
  std::vector<Region> out = {whole(width, height),
                             {0, 1, 0, 1},
                             {height - 1, height, width - 1, width},
                             {height - 1, height, 0, width},
                             {0, height, width - 1, width},
                             {height / 2, height / 2 + 1, 0, width},
                             {0, height, width / 3, width / 3 + 1}};
  std::mt19937_64 rng(seed);
  for (int i = 0; i < random_count; ++i) {
    const int r0 = static_cast<int>(rng() % height), c0 = static_cast<int>(rng() % width);
    const int r1 = r0 + 1 + static_cast<int>(rng() % (height - r0));
    const int c1 = c0 + 1 + static_cast<int>(rng() % (width - c0));
    out.push_back({r0, r1, c0, c1});
  }
  return out;
}

/// Every test region of `path` (decoded from the file and from memory) equals the same rectangle of
/// the full decode, sample for sample.
void check_regions_match_full(const std::string& path, DecodeMode mode, int denom,
                              std::uint64_t seed) {
  const ImageInfo info = data::internal::probe_image(path);
  const int w = (info.width + denom - 1) / denom, h = (info.height + denom - 1) / denom;
  const DecodedRegion full = data::internal::decode_region(path, info, whole(w, h), mode, denom);
  REQUIRE(full.region.rows() == h);
  const std::string bytes = read_bytes(path);
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  for (const Region& region : test_regions(w, h, seed, 30)) {
    INFO(path << " denom " << denom << " rows [" << region.row0 << ", " << region.row1 << ") cols ["
              << region.col0 << ", " << region.col1 << ")");
    const DecodedRegion got = data::internal::decode_region(path, info, region, mode, denom);
    REQUIRE(got.channels == full.channels);
    REQUIRE(samples(got) == cut(full, region));
    const DecodedRegion mem =
        data::internal::decode_region_memory(data, bytes.size(), path, info, region, mode, denom);
    REQUIRE(samples(mem) == samples(got));
  }
}

/// Mean absolute difference of two equally long sample lists, in float64.
double mean_abs_error(const std::vector<int>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += std::abs(a[i] - b[i]);
  return sum / static_cast<double>(a.size());
}

std::string write_test_jpeg(const TempDir& dir, const test::JpegSpec& spec, std::uint64_t seed) {
  // (std::ostringstream, not string operator+: GCC 12 warns falsely on "literal" + std::string.)
  std::ostringstream name;
  name << "p" << spec.channels << "_" << spec.subsampling << (spec.progressive ? "p" : "")
       << ".jpg";
  const std::string path = dir.file(name.str());
  test::write_jpeg(path, spec,
                   to_u8(test::test_picture(spec.width, spec.height, spec.channels, 8, seed)));
  return path;
}

std::vector<test::JpegSpec> jpeg_kinds(int width, int height) {
  std::vector<test::JpegSpec> out;
  for (int sub : {444, 422, 420}) out.push_back({width, height, 3, 95, sub, false});
  out.push_back({width, height, 1, 95, 444, false});
  out.push_back({width, height, 3, 95, 420, true});
  out.push_back({width, height, 1, 95, 444, true});
  return out;
}

const std::vector<std::array<std::uint8_t, 3>> kPalette = {
    {0, 0, 0},       {255, 0, 0},   {0, 200, 10}, {7, 8, 9},
    {250, 251, 252}, {1, 128, 255}, {33, 66, 99}, {90, 0, 45}};

}  // namespace

TEST_CASE("PNG decodes to the written samples exactly", "[image]") {
  TempDir dir;
  const int w = 37, h = 23;
  for (int channels = 1; channels <= 4; ++channels) {
    for (int depth : {8, 16}) {
      for (bool interlaced : {false, true}) {
        INFO(channels << " channels, " << depth << " bits, interlaced " << interlaced);
        const std::string path = dir.file("a.png");
        const auto written = test::test_picture(w, h, channels, depth, 7 + channels);
        test::write_png(path, {w, h, channels, depth, interlaced, {}}, written);
        const ImageInfo info = data::internal::probe_image(path);
        CHECK(info.format == data::internal::ImageFormat::Png);
        CHECK((info.width == w && info.height == h && info.channels == channels &&
               info.bit_depth == depth));
        CHECK(info.interlaced == interlaced);
        const DecodedRegion d = decode(path, whole(w, h));
        REQUIRE(d.bit_depth == depth);
        CHECK(samples(d) == std::vector<int>(written.begin(), written.end()));
      }
    }
  }
}

TEST_CASE("PNG gray below 8 bits scales in Color mode and keeps values in Index mode", "[image]") {
  TempDir dir;
  const int w = 37, h = 23;
  for (int depth : {1, 2, 4}) {
    INFO(depth << " bits");
    const std::string path = dir.file("g.png");
    const auto written = test::test_picture(w, h, 1, depth, 3);
    test::write_png(path, {w, h, 1, depth, false, {}}, written);
    const int max = (1 << depth) - 1;
    std::vector<int> scaled, raw;
    for (auto v : written) {
      scaled.push_back(v * 255 / max);
      raw.push_back(v);
    }
    CHECK(samples(decode(path, whole(w, h))) == scaled);
    CHECK(samples(decode(path, whole(w, h), DecodeMode::Index)) == raw);
  }
}

TEST_CASE("PNG palettes expand to their colours in Color mode and give indices in Index mode",
          "[image]") {
  TempDir dir;
  const int w = 37, h = 23;
  for (int depth : {8, 4, 2}) {
    for (bool interlaced : {false, true}) {
      INFO(depth << " bits, interlaced " << interlaced);
      const std::string path = dir.file("p.png");
      const auto palette = std::vector<std::array<std::uint8_t, 3>>(
          kPalette.begin(), kPalette.begin() + (1 << std::min(depth, 3)));
      auto indices = test::test_picture(w, h, 1, depth, 11);
      for (auto& v : indices) v = static_cast<std::uint16_t>(v % palette.size());
      test::write_png(path, {w, h, 1, depth, interlaced, palette}, indices);
      const ImageInfo info = data::internal::probe_image(path);
      CHECK((info.palette && info.channels == 3 && info.bit_depth == 8));
      std::vector<int> colours;
      for (auto v : indices)
        for (int k = 0; k < 3; ++k) colours.push_back(palette[v][k]);
      CHECK(samples(decode(path, whole(w, h))) == colours);
      CHECK(samples(decode(path, whole(w, h), DecodeMode::Index)) ==
            std::vector<int>(indices.begin(), indices.end()));
    }
  }
}

TEST_CASE("JPEG full decode is close to the written picture", "[image]") {
  TempDir dir;
  const int w = 203, h = 157;
  for (const auto& spec : jpeg_kinds(w, h)) {
    INFO(spec.channels << " channels, " << spec.subsampling << ", progressive "
                       << spec.progressive);
    const auto written = test::test_picture(w, h, spec.channels, 8, 5);
    const std::string path = write_test_jpeg(dir, spec, 5);
    const ImageInfo info = data::internal::probe_image(path);
    CHECK(
        (info.format == data::internal::ImageFormat::Jpeg && info.width == w && info.height == h));
    CHECK((info.channels == spec.channels && info.interlaced == spec.progressive));
    const DecodedRegion d = decode(path, whole(w, h));
    // Quality 95 keeps a smooth picture within about one level on average; 420 chroma blurs the
    // stripes' colour edges a little more. A decoder error (wrong colour space, swapped channels,
    // a shifted row) costs tens of levels.
    const double bound = spec.subsampling == 444 ? 1.5 : 3.0;
    CHECK(mean_abs_error(samples(d), std::vector<double>(written.begin(), written.end())) < bound);
  }
}

TEST_CASE("JPEG DCT-scaled decode has the rounded-up size and is close to a box downscale",
          "[image]") {
  TempDir dir;
  const int w = 203, h = 157;
  for (const auto& spec : jpeg_kinds(w, h)) {
    const std::string path = write_test_jpeg(dir, spec, 9);
    const DecodedRegion full = decode(path, whole(w, h));
    for (int denom : {2, 4, 8}) {
      INFO(spec.channels << " channels, " << spec.subsampling << ", progressive "
                         << spec.progressive << ", 1/" << denom);
      const int sw = (w + denom - 1) / denom, sh = (h + denom - 1) / denom;
      const DecodedRegion d = decode(path, whole(sw, sh), DecodeMode::Color, denom);
      REQUIRE((d.region.cols() == sw && d.region.rows() == sh));
      CHECK(error_of([&] { decode(path, whole(sw + 1, sh), DecodeMode::Color, denom); }) !=
            "<no exception>");
      // The box mean of each denom × denom block of the full decode (cut at the image's edge), in
      // float64.
      std::vector<double> box;
      for (int r = 0; r < sh; ++r)
        for (int c = 0; c < sw; ++c)
          for (int k = 0; k < spec.channels; ++k) {
            double sum = 0;
            int n = 0;
            for (int y = r * denom; y < std::min(h, (r + 1) * denom); ++y)
              for (int x = c * denom; x < std::min(w, (c + 1) * denom); ++x, ++n)
                sum += full.at(y, x, k);
            box.push_back(sum / n);
          }
      // At 1/8 a 422 image's chroma stays at half the output's width (libjpeg-turbo scales both
      // DCT dimensions alike, and 422 subsamples one) and is upsampled with the fancy filter, which
      // smooths the stripes' colour edges beyond a box mean; a broken scale costs tens of levels.
      const double bound = spec.subsampling == 422 && spec.channels == 3 && denom == 8 ? 7.0 : 3.0;
      CHECK(mean_abs_error(samples(d), box) < bound);
    }
  }
}

TEST_CASE("JPEG regions equal the same rectangle of the full decode at every scale", "[image]") {
  TempDir dir;
  std::uint64_t seed = 100;
  for (const auto& spec : jpeg_kinds(203, 157)) {
    const std::string path = write_test_jpeg(dir, spec, seed);
    for (int denom : {1, 2, 4, 8}) check_regions_match_full(path, DecodeMode::Color, denom, ++seed);
    if (spec.channels == 1) check_regions_match_full(path, DecodeMode::Index, 1, ++seed);
  }
}

TEST_CASE("PNG regions equal the same rectangle of the full decode", "[image]") {
  TempDir dir;
  std::uint64_t seed = 200;
  for (int channels = 1; channels <= 4; ++channels) {
    for (int depth : {8, 16}) {
      for (bool interlaced : {false, true}) {
        std::ostringstream name;
        name << "r" << channels << "_" << depth << (interlaced ? "i" : "") << ".png";
        const std::string path = dir.file(name.str());
        test::write_png(path, {61, 47, channels, depth, interlaced, {}},
                        test::test_picture(61, 47, channels, depth, ++seed));
        check_regions_match_full(path, DecodeMode::Color, 1, ++seed);
      }
    }
  }
  const std::string path = dir.file("pal.png");
  auto indices = test::test_picture(61, 47, 1, 8, 3);
  for (auto& v : indices) v = static_cast<std::uint16_t>(v % kPalette.size());
  test::write_png(path, {61, 47, 1, 8, false, kPalette}, indices);
  check_regions_match_full(path, DecodeMode::Color, 1, ++seed);
  check_regions_match_full(path, DecodeMode::Index, 1, ++seed);
}

TEST_CASE("A narrow region decodes far fewer pixels than the whole image", "[image]") {
  TempDir dir;
  const int w = 512, h = 384;
  const std::string jpg = write_test_jpeg(dir, {w, h, 3, 90, 420, false}, 1);
  const DecodedRegion full = decode(jpg, whole(w, h));
  CHECK(full.pixels_decoded >= std::int64_t{w} * h);
  const DecodedRegion part = decode(jpg, {300, 310, 200, 232});
  // Rows from one iMCU above the region, columns within one iMCU (plus alignment) around it.
  CHECK(part.pixels_decoded <= std::int64_t{(310 - 300 + 32) * (232 - 200 + 64)});
  const DecodedRegion top = decode(jpg, {0, 16, 0, w});
  CHECK(top.bytes_read < full.bytes_read / 4);

  const std::string png = dir.file("big.png");
  test::write_png(png, {w, h, 3, 8, false, {}}, test::test_picture(w, h, 3, 8, 2));
  const DecodedRegion png_full = decode(png, whole(w, h));
  CHECK(png_full.pixels_decoded == std::int64_t{w} * h);
  const DecodedRegion png_top = decode(png, {10, 20, 5, 9});
  CHECK(png_top.pixels_decoded == std::int64_t{20} * w);
  CHECK(png_top.bytes_read < png_full.bytes_read / 4);
}

namespace {

/// A PNG chunk: length, type, data, CRC-32 (computed bit by bit, independently of zlib).
std::string png_chunk(const std::string& type, const std::string& body) {
  std::string out;
  for (int s = 24; s >= 0; s -= 8) out += static_cast<char>((body.size() >> s) & 0xff);
  const std::string crc_input = type + body;
  std::uint32_t crc = 0xffffffffu;
  for (unsigned char ch : crc_input) {
    crc ^= ch;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xffffffffu;
  out += crc_input;
  for (int s = 24; s >= 0; s -= 8) out += static_cast<char>((crc >> s) & 0xff);
  return out;
}

std::string be32(std::uint32_t v) {
  std::string out;
  for (int s = 24; s >= 0; s -= 8) out += static_cast<char>((v >> s) & 0xff);
  return out;
}

/// A JPEG in a form write_jpeg() does not make (CMYK, restart markers), written with libjpeg's
/// defaults (4:2:0 for YCbCr) and its default error handler: a failure here ends the test run.
struct RawJpeg {
  int width = 0, height = 0, components = 3;
  J_COLOR_SPACE space = JCS_RGB;
  int restart_rows = 0;  ///< a restart marker every this many MCU rows (0: none)
};

void write_raw_jpeg(const std::string& path, const RawJpeg& spec,
                    const std::vector<std::uint8_t>& samples) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  jpeg_stdio_dest(&c, f);
  c.image_width = static_cast<JDIMENSION>(spec.width);
  c.image_height = static_cast<JDIMENSION>(spec.height);
  c.input_components = spec.components;
  c.in_color_space = spec.space;
  jpeg_set_defaults(&c);
  c.restart_in_rows = spec.restart_rows;
  jpeg_start_compress(&c, TRUE);
  const std::size_t stride = static_cast<std::size_t>(spec.width) * spec.components;
  for (int y = 0; y < spec.height; ++y) {
    JSAMPROW p = const_cast<JSAMPLE*>(samples.data() + y * stride);
    jpeg_write_scanlines(&c, &p, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

}  // namespace

TEST_CASE("JPEG regions with restart markers equal the full decode", "[image]") {
  TempDir dir;
  const std::string path = dir.file("restart.jpg");
  write_raw_jpeg(path, {203, 157, 3, JCS_RGB, 1}, to_u8(test::test_picture(203, 157, 3, 8, 31)));
  REQUIRE(read_bytes(path).find("\xff\xd0") != std::string::npos);  // a restart marker is there
  for (int denom : {1, 2, 8}) check_regions_match_full(path, DecodeMode::Color, denom, 300 + denom);
}

// Below the top, the decoder starts at the restart marker above the region (image_jpeg_restart):
// a JPEG of its own cut out of the file. Every chroma layout, marker spacing (every MCU row, every
// 2 or 3 rows, every 5 MCUs: a row begins a segment only every 5 rows of 13 MCUs) and DCT scale.
TEST_CASE("JPEG regions decoded from a restart marker equal the full decode", "[image]") {
  TempDir dir;
  std::uint64_t seed = 400;
  std::vector<test::JpegExtras> spacings(4);
  spacings[0].restart_rows = 1;
  spacings[1].restart_rows = 2;
  spacings[2].restart_rows = 3;
  spacings[3].restart_mcus = 5;
  for (const test::JpegSpec& spec : jpeg_kinds(203, 157)) {
    if (spec.progressive) continue;  // decoded from the top whatever its markers
    for (const test::JpegExtras& extras : spacings) {
      const std::string path = dir.file("rs.jpg");
      test::write_jpeg(path, spec,
                       to_u8(test::test_picture(spec.width, spec.height, spec.channels, 8, ++seed)),
                       extras);
      INFO("channels " << spec.channels << " subsampling " << spec.subsampling << " restart rows "
                       << extras.restart_rows << " mcus " << extras.restart_mcus);
      for (int denom : {1, 2, 4, 8})
        check_regions_match_full(path, DecodeMode::Color, denom, ++seed);
    }
  }
}

TEST_CASE("A region low in a JPEG with restart markers reads only its part of the file",
          "[image]") {
  TempDir dir;
  const int w = 512, h = 384;
  const auto px = to_u8(test::test_picture(w, h, 3, 8, 7));
  const std::string plain = dir.file("plain.jpg"), marked = dir.file("marked.jpg");
  test::write_jpeg(plain, {w, h, 3, 90, 420, false}, px);
  test::JpegExtras every_row;
  every_row.restart_rows = 1;
  test::write_jpeg(marked, {w, h, 3, 90, 420, false}, px, every_row);
  const Region bottom{288, 384, 0, w};  // the last quarter, as the last of 4 ranks holds it
  const ImageInfo info = data::internal::probe_image(marked);
  const DecodedRegion full = decode(marked, whole(w, h));
  // The first decode below the top reads the whole file to find the markers; with the slot that
  // keeps where they are, later ones read the header and their segments only.
  data::internal::RestartSlot slot;
  const DecodedRegion first =
      data::internal::decode_region(marked, info, bottom, DecodeMode::Color, 1, &slot);
  const DecodedRegion part =
      data::internal::decode_region(marked, info, bottom, DecodeMode::Color, 1, &slot);
  CHECK(first.bytes_read == info.file_bytes);
  // From the MCU row (16 image rows) above the region: 112 of 384 rows, and their bytes only.
  CHECK(part.pixels_decoded == std::int64_t{112} * w);
  CHECK(part.bytes_read < info.file_bytes * 2 / 5);
  CHECK(samples(part) == cut(full, bottom));
  CHECK(samples(first) == cut(full, bottom));
  // A file replaced under its slot (another size) is indexed again, not cut at the old places.
  test::JpegExtras every_2_rows;
  every_2_rows.restart_rows = 2;
  test::write_jpeg(marked, {w, h, 3, 80, 420, false}, px, every_2_rows);
  const ImageInfo info2 = data::internal::probe_image(marked);
  REQUIRE(info2.file_bytes != info.file_bytes);
  const DecodedRegion again =
      data::internal::decode_region(marked, info2, bottom, DecodeMode::Color, 1, &slot);
  CHECK(again.bytes_read == info2.file_bytes);
  CHECK(samples(again) == cut(decode(marked, whole(w, h)), bottom));
  // Without markers every byte above the region is read (and Huffman-decoded) to reach it.
  const DecodedRegion part_plain = decode(plain, bottom);
  CHECK(part_plain.bytes_read > data::internal::probe_image(plain).file_bytes * 9 / 10);
}

TEST_CASE("A damaged restart marker below the top is named, not decoded around", "[image]") {
  TempDir dir;
  const int w = 128, h = 128;
  test::JpegExtras every_row;
  every_row.restart_rows = 1;
  const std::string path = dir.file("ok.jpg");
  test::write_jpeg(path, {w, h, 3, 90, 420, false}, to_u8(test::test_picture(w, h, 3, 8, 9)),
                   every_row);
  std::string bytes = read_bytes(path);
  const std::size_t rst3 = bytes.find("\xff\xd3", bytes.find("\xff\xda"));  // begins row 64
  REQUIRE(rst3 != std::string::npos);
  bytes[rst3 + 1] = static_cast<char>(0xd5);
  const std::string bad = dir.file("bad.jpg");
  test::write_file(bad, bytes);
  // Below the damage: the marker walk refuses the file, the decode from the top names it.
  CHECK_THAT(error_of([&] {
               decode(bad, {100, 120, 0, w});
             }),
             Contains(bad) && Contains("Corrupt JPEG data"));
  // Above it the file decodes as before.
  CHECK(samples(decode(bad, {20, 40, 0, w})) == samples(decode(path, {20, 40, 0, w})));
}

TEST_CASE("A palette PNG with a tRNS chunk expands to RGBA in Color mode", "[image]") {
  TempDir dir;
  const int w = 37, h = 23;
  auto indices = test::test_picture(w, h, 1, 8, 21);
  for (auto& v : indices) v = static_cast<std::uint16_t>(v % kPalette.size());
  for (bool interlaced : {false, true}) {
    INFO("interlaced " << interlaced);
    const std::string plain = dir.file("plain.png"), path = dir.file("trns.png");
    test::write_png(plain, {w, h, 1, 8, interlaced, kPalette}, indices);
    // tRNS goes right after PLTE: alphas for the first three entries, the rest stay opaque.
    const std::string bytes = read_bytes(plain);
    const std::size_t plte = bytes.find("PLTE") - 4;
    const std::size_t after = plte + 12 + kPalette.size() * 3;
    const std::string alphas("\x00\x80\xff", 3);
    test::write_file(path,
                     bytes.substr(0, after) + png_chunk("tRNS", alphas) + bytes.substr(after));
    const ImageInfo info = data::internal::probe_image(path);
    CHECK((info.palette && info.channels == 4));
    std::vector<int> rgba;
    for (auto v : indices) {
      for (int k = 0; k < 3; ++k) rgba.push_back(kPalette[v][k]);
      rgba.push_back(v < 3 ? static_cast<unsigned char>(alphas[v]) : 255);
    }
    CHECK(samples(decode(path, whole(w, h))) == rgba);
    CHECK(samples(decode(path, whole(w, h), DecodeMode::Index)) ==
          std::vector<int>(indices.begin(), indices.end()));
  }
}

namespace {

/// A good JPEG and PNG to damage, and the probe's error message for a path.
struct BadFiles {
  TempDir dir;
  std::string jpg = write_test_jpeg(dir, {64, 48, 3, 90, 420, false}, 4);
  std::string png = dir.file("ok.png");
  std::string jpg_bytes, png_bytes;
  BadFiles() {
    test::write_png(png, {64, 48, 3, 8, false, {}}, test::test_picture(64, 48, 3, 8, 4));
    jpg_bytes = read_bytes(jpg);
    png_bytes = read_bytes(png);
  }
  static std::string probe(const std::string& path) {
    return error_of([&] { data::internal::probe_image(path); });
  }
};

}  // namespace

TEST_CASE("Truncated, padded and corrupt image files are told apart", "[image]") {
  BadFiles f;
  auto& [dir, jpg, png, jpg_bytes, png_bytes] = f;
  auto probe = BadFiles::probe;
  SECTION("truncated files are found at probe") {
    for (const auto& [path, bytes] : {std::pair{jpg, jpg_bytes}, std::pair{png, png_bytes}}) {
      const std::string cut_path = path + ".cut";
      test::write_file(cut_path, bytes.substr(0, bytes.size() * 2 / 3));
      CHECK_THAT(probe(cut_path),
                 Contains(cut_path) && Contains("truncated") && Contains("re-encode or remove"));
    }
  }
  SECTION("trailing padding after the end marker is allowed, other trailing bytes are not") {
    test::write_file(dir.file("pad.jpg"), jpg_bytes + std::string(8, '\0'));
    CHECK(data::internal::probe_image(dir.file("pad.jpg")).width == 64);
    test::write_file(dir.file("tail.jpg"), jpg_bytes + "trailer");
    CHECK_THAT(probe(dir.file("tail.jpg")), Contains("truncated or damaged"));
    test::write_file(dir.file("pad.png"), png_bytes + std::string(40, '\n'));
    CHECK_THAT(probe(dir.file("pad.png")), Contains("IEND"));
  }
  SECTION("corrupt entropy data fails the decode") {
    // A marker a third of the way into the entropy-coded data (after the SOS segment): the scan
    // ends early there. Flipped entropy bits alone may still decode (Huffman codes have no check).
    const std::size_t sos = jpg_bytes.find("\xff\xda");
    REQUIRE(sos != std::string::npos);
    const std::size_t scan = sos + 2 + (static_cast<unsigned char>(jpg_bytes[sos + 2]) << 8) +
                             static_cast<unsigned char>(jpg_bytes[sos + 3]);
    std::string bad = jpg_bytes;
    const std::size_t at = scan + (bad.size() - 2 - scan) / 3;
    bad[at] = static_cast<char>(0xff);
    bad[at + 1] = static_cast<char>(0xd5);
    test::write_file(dir.file("bad.jpg"), bad);
    const ImageInfo info = data::internal::probe_image(dir.file("bad.jpg"));
    CHECK_THAT(error_of([&] {
                 data::internal::decode_region(dir.file("bad.jpg"), info, whole(64, 48),
                                               DecodeMode::Color);
               }),
               Contains(dir.file("bad.jpg")) && Contains("Corrupt JPEG data"));
    std::string bad_png = png_bytes;
    for (std::size_t i = bad_png.size() / 2; i < bad_png.size() / 2 + 4; ++i)
      bad_png[i] = static_cast<char>(~bad_png[i]);
    test::write_file(dir.file("bad.png"), bad_png);
    CHECK_THAT(error_of([&] { decode(dir.file("bad.png"), whole(64, 48)); }),
               Contains(dir.file("bad.png")) && Contains("not a readable PNG"));
  }
}

TEST_CASE("Files that are not gray or RGB images of a sane size are refused at probe", "[image]") {
  BadFiles f;
  auto& dir = f.dir;
  auto probe = BadFiles::probe;
  SECTION("files that are not images") {
    test::write_file(dir.file("empty.jpg"), "");
    CHECK_THAT(probe(dir.file("empty.jpg")), Contains(dir.file("empty.jpg")) && Contains("empty"));
    test::write_file(dir.file("text.png"), "hello, this is not a picture\n");
    CHECK_THAT(probe(dir.file("text.png")), Contains("not a JPEG or PNG"));
    test::write_file(dir.file("sig.jpg"), std::string("\xff\xd8\xff\xd9", 4));
    CHECK_THAT(probe(dir.file("sig.jpg")), Contains("not a readable JPEG"));
    CHECK_THAT(probe(dir.file("missing.png")), Contains("cannot open"));
  }
  SECTION("CMYK JPEGs are refused at probe") {
    write_raw_jpeg(dir.file("cmyk.jpg"), {16, 8, 4, JCS_CMYK, 0},
                   std::vector<std::uint8_t>(512, 100));
    CHECK_THAT(probe(dir.file("cmyk.jpg")), Contains("CMYK") && Contains(dir.file("cmyk.jpg")));
  }
  SECTION("images over 2^28 pixels and of zero size are refused at probe") {
    const std::string sig("\x89PNG\r\n\x1a\n", 8);
    auto header = [&](std::uint32_t w, std::uint32_t h) {
      return sig + png_chunk("IHDR", be32(w) + be32(h) + std::string("\x08\x02\x00\x00\x00", 5)) +
             png_chunk("IDAT", "") + png_chunk("IEND", "");
    };
    test::write_file(dir.file("huge.png"), header(20000, 20000));
    CHECK_THAT(probe(dir.file("huge.png")), Contains("2^28"));
    test::write_file(dir.file("zero.png"), header(0, 10));
    CHECK_THAT(probe(dir.file("zero.png")), Contains(dir.file("zero.png")));
  }
}

TEST_CASE("Bad decode requests are refused with the reason", "[image]") {
  BadFiles f;
  const std::string& jpg = f.jpg;
  const std::string& png = f.png;
  SECTION("bad requests: Index of a colour image, a region outside, a bad scale") {
    const ImageInfo info = data::internal::probe_image(png);
    CHECK_THAT(error_of([&] {
                 data::internal::decode_region(png, info, whole(64, 48), DecodeMode::Index);
               }),
               Contains("palette or gray"));
    CHECK_THAT(error_of([&] {
                 data::internal::decode_region(png, info, {0, 49, 0, 64}, DecodeMode::Color);
               }),
               Contains("outside"));
    CHECK_THAT(error_of([&] {
                 data::internal::decode_region(png, info, {5, 5, 0, 64}, DecodeMode::Color);
               }),
               Contains("empty"));
    CHECK_THAT(error_of([&] {
                 data::internal::decode_region(png, info, whole(32, 24), DecodeMode::Color, 2);
               }),
               Contains("scale_denom"));
    const ImageInfo jinfo = data::internal::probe_image(jpg);
    CHECK_THAT(error_of([&] {
                 data::internal::decode_region(jpg, jinfo, whole(22, 16), DecodeMode::Color, 3);
               }),
               Contains("1, 2, 4 or 8"));
    CHECK_THAT(error_of([&] {
                 data::internal::decode_region(jpg, jinfo, {-1, 4, 0, 4}, DecodeMode::Color);
               }),
               Contains("outside"));
    CHECK_THAT(error_of([&] {
                 data::internal::decode_region(jpg, jinfo, whole(64, 48), DecodeMode::Index);
               }),
               Contains("palette or gray"));
  }
}
