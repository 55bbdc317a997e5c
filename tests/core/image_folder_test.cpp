// The image-folder dataset: transforms against a plain float64 reference written here from the
// documented definitions, sharded loads equal to unsharded ones bit for bit, per-epoch draws,
// shard-only decoding in the stats, and each kind of bad folder refused (or skipped) with its
// message.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <thread>

#include "../../core/src/data/image_decode.hpp"
#include "support/image_files.hpp"
#include "support/test_utils.hpp"
#include "tessera/data/image_folder.hpp"

using namespace tessera;
using Catch::Matchers::Contains;
using core::DeviceMesh;
using core::Layout;
using core::Shard;
using data::ImageFolderOptions;
using data::Task;
using test::error_of;
namespace fs = std::filesystem;
namespace di = tessera::data::internal;

namespace {

enum class Kind { Png8, Png16, Gray, Rgba, Jpeg420, JpegProg };

/// Writes a test picture of `kind` (w × h, pattern `seed`) to `path`.
void write_image(const fs::path& path, Kind kind, int w, int h, std::uint64_t seed) {
  if (kind == Kind::Jpeg420 || kind == Kind::JpegProg) {
    const auto pic = test::test_picture(w, h, 3, 8, seed);
    std::vector<std::uint8_t> px(pic.begin(), pic.end());
    test::write_jpeg(path.string(), {w, h, 3, 95, 420, kind == Kind::JpegProg}, px);
    return;
  }
  const int ch = kind == Kind::Gray   ? 1
                 : kind == Kind::Rgba ? 4
                                      : 3,
            depth = kind == Kind::Png16 ? 16 : 8;
  test::PngSpec spec;
  spec.width = w, spec.height = h, spec.channels = ch, spec.bit_depth = depth;
  test::write_png(path.string(), spec, test::test_picture(w, h, ch, depth, seed));
}

/// A mask of class indices 0..classes−1 with some pixels `ignore` (8/16-bit gray, or palette).
void write_mask(const fs::path& path, int w, int h, int classes, int ignore, bool palette,
                std::uint64_t seed, int bit_depth = 8) {
  std::vector<std::uint16_t> v(static_cast<std::size_t>(w) * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      v[y * w + x] = (x * 7 + y * 3 + seed) % 11 == 0 ? ignore : ((x / 3 + y / 2 + seed) % classes);
  test::PngSpec spec;
  spec.width = w, spec.height = h, spec.channels = 1, spec.bit_depth = bit_depth;
  if (palette)
    for (int i = 0; i < 256; ++i)
      spec.palette.push_back({std::uint8_t(i), std::uint8_t(255 - i), 7});
  test::write_png(path.string(), spec, v);
}

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("tessera_images") {}
  std::string str() const { return path.string(); }
};

// ---- The float64 reference, written from the definitions (image_folder.hpp) ----

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double draw(std::uint64_t seed, std::int64_t sample, std::int64_t epoch, int stream) {
  const std::uint64_t h = mix(mix(mix(mix(seed) ^ std::uint64_t(sample)) ^ std::uint64_t(epoch)) ^
                              std::uint64_t(stream));
  return double(h >> 11) / 9007199254740992.0;
}

struct RefGeom {
  double k;
  std::int64_t cy, cx;
  bool flip;
};

RefGeom ref_geometry(const ImageFolderOptions& o, int h, int w, std::int64_t sample,
                     std::int64_t epoch) {
  const double s =
      o.augment ? o.scale_min + (o.scale_max - o.scale_min) * draw(o.seed, sample, epoch, 0) : 1.0;
  const double k = std::max(double(o.height) / h, double(o.width) / w) * s;
  const std::int64_t rh = std::max<std::int64_t>(o.height, std::llround(h * k));
  const std::int64_t rw = std::max<std::int64_t>(o.width, std::llround(w * k));
  if (!o.augment) return {k, (rh - o.height) / 2, (rw - o.width) / 2, false};
  auto pick = [](double u, std::int64_t range) {
    return std::min<std::int64_t>(range, std::int64_t(u * (range + 1)));
  };
  return {k, pick(draw(o.seed, sample, epoch, 1), rh - o.height),
          pick(draw(o.seed, sample, epoch, 2), rw - o.width),
          o.flip && draw(o.seed, sample, epoch, 3) < 0.5};
}

/// Source pixels and weights of resized coordinate r: a triangle of half-width max(1, 1/k)
/// centred at (r + 0.5)/k − 0.5, over every source pixel, normalised.
std::vector<std::pair<int, double>> ref_taps(std::int64_t r, double k, int n) {
  const double support = std::max(1.0, 1.0 / k), centre = (r + 0.5) / k - 0.5;
  std::vector<std::pair<int, double>> t;
  double sum = 0;
  for (int x = 0; x < n; ++x) {
    const double w = std::max(0.0, 1.0 - std::abs(x - centre) / support);
    if (w > 0) t.push_back({x, w}), sum += w;
  }
  for (auto& p : t) p.second /= sum;
  return t;
}

/// The dataset's expected images (C,H,W) and labels for sample `sample` of `ds` in `epoch`.
struct RefSample {
  std::vector<double> image;
  std::vector<std::int64_t> labels;
};

RefSample reference(const ImageFolderOptions& o, const std::pair<std::string, std::string>& files,
                    std::int64_t sample, std::int64_t epoch) {
  const di::ImageInfo info = di::probe_image(files.first);
  const RefGeom g = ref_geometry(o, info.height, info.width, sample, epoch);
  int d = 1;
  if (o.jpeg_downscale && info.format == di::ImageFormat::Jpeg)
    for (int c : {2, 4, 8}) d = g.k * c <= 1.0 ? c : d;
  const int h = (info.height + d - 1) / d, w = (info.width + d - 1) / d;
  const di::DecodedRegion full =
      di::decode_region(files.first, info, {0, h, 0, w}, di::DecodeMode::Color, d);
  const double maxv = full.bit_depth == 16 ? 65535.0 : 255.0;
  auto value = [&](int y, int x, int c) -> double {
    if (full.channels <= 2) return full.at(y, x, 0);
    if (o.channels == 1)
      return 0.299 * full.at(y, x, 0) + 0.587 * full.at(y, x, 1) + 0.114 * full.at(y, x, 2);
    return full.at(y, x, c);
  };
  RefSample out;
  for (int c = 0; c < o.channels; ++c)
    for (int y = 0; y < o.height; ++y)
      for (int x = 0; x < o.width; ++x) {
        const std::int64_t rx = g.flip ? g.cx + o.width - 1 - x : g.cx + x;
        double v = 0;
        for (auto [sy, wy] : ref_taps(g.cy + y, g.k * d, h))
          for (auto [sx, wx] : ref_taps(rx, g.k * d, w)) v += wy * wx * value(sy, sx, c);
        out.image.push_back((v / maxv - o.mean[c]) / o.std[c]);
      }
  if (files.second.empty()) return out;
  const di::ImageInfo mi = di::probe_image(files.second);
  const di::DecodedRegion m =
      di::decode_region(files.second, mi, {0, mi.height, 0, mi.width}, di::DecodeMode::Index);
  for (int y = 0; y < o.height; ++y)
    for (int x = 0; x < o.width; ++x) {
      const std::int64_t rx = g.flip ? g.cx + o.width - 1 - x : g.cx + x;
      const int sy = std::min<int>(mi.height - 1, int(std::floor((g.cy + y + 0.5) / g.k)));
      const int sx = std::min<int>(mi.width - 1, int(std::floor((rx + 0.5) / g.k)));
      const int v = m.at(sy, sx, 0);
      out.labels.push_back(v == o.mask_ignore || v >= o.num_classes ? -1 : v);
    }
  return out;
}

/// Compares batch row n of `b` with the reference of its sample.
void check_row(const data::Batch& b, int n, const RefSample& ref, const ImageFolderOptions& o,
               Task task) {
  const std::size_t plane = std::size_t(o.height) * o.width;
  const float* img = b.images.data<float>() + n * o.channels * plane;
  double worst = 0;
  for (std::size_t i = 0; i < ref.image.size(); ++i)
    worst = std::max(worst, std::abs(img[i] - ref.image[i]));
  REQUIRE(worst < 1e-5);
  if (task == Task::Segment) {
    const std::int64_t* lab = b.labels.data<std::int64_t>() + n * plane;
    REQUIRE(std::equal(ref.labels.begin(), ref.labels.end(), lab));
  }
}

/// A classification folder: classes a, b with images of `kind` in several sizes.
ImageFolderOptions class_folder(const fs::path& dir, Kind kind) {
  const std::string ext = kind == Kind::Jpeg420 || kind == Kind::JpegProg ? ".jpg" : ".png";
  const int sizes[4][2] = {{37, 29}, {64, 50}, {41, 80}, {24, 32}};  // w, h
  for (int i = 0; i < 4; ++i) {
    fs::create_directories(dir / (i % 2 ? "b" : "a"));
    write_image(dir / (i % 2 ? "b" : "a") / ("img" + std::to_string(i) + ext), kind, sizes[i][0],
                sizes[i][1], i);
  }
  ImageFolderOptions o;
  o.folder = dir.string();
  o.height = 24, o.width = 32;
  return o;
}

/// A segmentation folder of 3 samples: PNG or JPEG images with palette or gray masks (16-bit
/// with 16-bit images).
ImageFolderOptions seg_folder(const fs::path& dir, Kind kind, bool palette, int w = 45,
                              int h = 33) {
  fs::create_directories(dir / "images");
  fs::create_directories(dir / "masks");
  const std::string ext = kind == Kind::Jpeg420 || kind == Kind::JpegProg ? ".jpg" : ".png";
  for (int i = 0; i < 3; ++i) {
    std::string name = "s";
    name += static_cast<char>('0' + i);
    write_image(dir / "images" / (name + ext), kind, w + 9 * i, h + 5 * i, 10 + i);
    write_mask(dir / "masks" / (name + ".png"), w + 9 * i, h + 5 * i, 5, 255, palette, i,
               kind == Kind::Png16 ? 16 : 8);
  }
  ImageFolderOptions o;
  o.folder = dir.string();
  o.num_classes = 5;
  o.height = 22, o.width = 31;
  return o;
}

void check_against_reference(const ImageFolderOptions& o, std::int64_t epoch) {
  const auto ds = data::open_image_folder(o);
  const auto files = data::image_folder_files(*ds);
  const std::vector<std::int64_t> samples = {1, 0, 2};
  const core::Shape g{3, o.channels, o.height, o.width};
  const Layout whole = Layout::replicated(DeviceMesh(), g);
  data::Batch b = data::allocate_batch(whole, 0, ds->task(), nullptr);
  ds->load_into_at(samples, epoch * ds->size(), whole, 0, b);
  for (int n = 0; n < 3; ++n) {
    INFO("sample " << samples[n] << " epoch " << epoch);
    check_row(b, n, reference(o, files[samples[n]], samples[n], epoch), o, ds->task());
  }
}

}  // namespace

TEST_CASE("image folder: pixels and labels match a float64 reference", "[images]") {
  const Kind kind =
      GENERATE(Kind::Png8, Kind::Png16, Kind::Gray, Kind::Rgba, Kind::Jpeg420, Kind::JpegProg);
  const int mode = GENERATE(0, 1, 2);  // evaluation, zoom + flip, gray output with zoom
  TempDir dir;
  ImageFolderOptions o = class_folder(dir.path, kind);
  o.augment = mode != 0;
  o.scale_max = mode == 0 ? 1.0 : 1.7;
  o.seed = 11;
  if (mode == 2) o.channels = 1, o.mean = {0.5}, o.std = {0.25};
  for (std::int64_t epoch : {0, 3}) check_against_reference(o, epoch);

  TempDir seg;
  ImageFolderOptions s = seg_folder(seg.path, kind, kind == Kind::Png8);
  s.augment = mode != 0;
  s.scale_max = mode == 0 ? 1.0 : 1.5;
  check_against_reference(s, 1);
}

TEST_CASE("image folder: large shrinks decode JPEG at 1/2 to 1/8 and still match the reference",
          "[images]") {
  const bool downscale = GENERATE(true, false);
  TempDir dir;
  ImageFolderOptions o =
      seg_folder(dir.path, GENERATE(Kind::Jpeg420, Kind::JpegProg), false, 230, 170);
  o.height = 20, o.width = 25;  // k about 1/9 .. 1/7: denominators 4 and 8
  o.jpeg_downscale = downscale;
  o.scale_max = 1.8;
  check_against_reference(o, 0);
  check_against_reference(o, 2);
}

TEST_CASE("image folder: sharded loads equal the unsharded load bit for bit", "[images]") {
  const Kind kind = GENERATE(Kind::Png8, Kind::Png16, Kind::Jpeg420, Kind::JpegProg);
  const bool segment = GENERATE(false, true);
  const int mode = GENERATE(0, 1, 2);  // k == 1 centre crop, zoom + flip, shrink (downscale)
  TempDir dir;
  ImageFolderOptions o = segment ? seg_folder(dir.path, kind, kind == Kind::Png8, 101, 22)
                                 : class_folder(dir.path, kind);
  o.height = 22, o.width = 3 * 32 + 5;
  if (!segment) o.width = 32 + 5, o.height = 24;
  o.augment = mode != 0;
  o.scale_max = mode == 0 ? 1.0 : 1.6;
  if (mode == 2) o.height = 9, o.width = 13;
  const auto ds = data::open_image_folder(o);
  const core::Shape g{4, 3, o.height, o.width};
  const std::vector<std::int64_t> samples = {2, 0, 1, 2};
  data::Batch whole =
      data::allocate_batch(Layout::replicated(DeviceMesh(), g), 0, ds->task(), nullptr);
  ds->load_into_at(samples, 5, Layout::replicated(DeviceMesh(), g), 0, whole);
  const std::vector<Layout> layouts = {
      Layout(DeviceMesh({2}, {"sp"}), g, {Shard(3)}),
      Layout(DeviceMesh({3}, {"sp"}), g, {Shard(3)}),
      Layout(DeviceMesh({2}, {"sp"}), g, {Shard(2)}),
      Layout(DeviceMesh({3}, {"sp"}), g, {Shard(2)}),
      Layout(DeviceMesh({2, 2}, {"h", "w"}), g, {Shard(2), Shard(3)}),
      Layout(DeviceMesh({2, 3}, {"dp", "sp"}), g, {Shard(0), Shard(3)}),
      Layout(DeviceMesh({3}, {"c"}), g, {Shard(1)}),
  };
  for (const Layout& l : layouts)
    for (int r = 0; r < l.mesh().size(); ++r) {
      INFO("layout " << l.to_string() << " rank " << r);
      data::Batch part = data::allocate_batch(l, r, ds->task(), nullptr);
      ds->load_into_at(samples, 5, l, r, part);
      const auto n = l.local_range(r, 0), c = l.local_range(r, 1), h = l.local_range(r, 2),
                 w = l.local_range(r, 3);
      REQUIRE(test::bytes_of(part.images) ==
              test::bytes_of(whole.images.narrow(0, n.begin, n.size())
                                 .narrow(1, c.begin, c.size())
                                 .narrow(2, h.begin, h.size())
                                 .narrow(3, w.begin, w.size())));
      core::Tensor lab = whole.labels.narrow(0, n.begin, n.size());
      if (segment) lab = lab.narrow(1, h.begin, h.size()).narrow(2, w.begin, w.size());
      REQUIRE(test::bytes_of(part.labels) == test::bytes_of(lab));
    }
}

TEST_CASE("image folder: each epoch draws new transforms, the same position the same ones",
          "[images]") {
  TempDir dir;
  ImageFolderOptions o = class_folder(dir.path, Kind::Png8);
  o.scale_max = 1.8;
  const auto ds = data::open_image_folder(o);
  const core::Shape g{4, 3, o.height, o.width};
  const Layout l = Layout::replicated(DeviceMesh(), g);
  const std::vector<std::int64_t> samples = {0, 1, 2, 3};
  auto rows_at = [&](std::int64_t position, std::int64_t first, std::int64_t count) {
    data::Batch b = data::allocate_batch(l, 0, ds->task(), nullptr);
    ds->load_into_at(samples, position, l, 0, b);
    return test::bytes_of(b.images.narrow(0, first, count));
  };
  auto load_at = [&](std::int64_t position) { return rows_at(position, 0, 4); };
  REQUIRE(load_at(0) == load_at(0));
  REQUIRE(load_at(0) == test::bytes_of(ds->load_samples(samples, l, 0, nullptr).images));
  // From position 2, rows 0 and 1 are in epoch 0 (positions 2, 3), rows 2 and 3 in epoch 1.
  REQUIRE(rows_at(2, 0, 2) == rows_at(0, 0, 2));
  REQUIRE(rows_at(2, 2, 2) == rows_at(4, 2, 2));
  REQUIRE(rows_at(2, 2, 2) != rows_at(0, 2, 2));
  REQUIRE(load_at(0) != load_at(4));  // epoch 1
  REQUIRE(load_at(4) != load_at(8));
  o.seed = 1;
  REQUIRE(test::bytes_of(data::open_image_folder(o)->load_samples(samples, l, 0, nullptr).images) !=
          load_at(0));
}

TEST_CASE("image folder: a rank decodes about its share of the rows", "[images]") {
  TempDir dir;
  fs::create_directories(dir.path / "a");
  write_image(dir.path / "a" / "big.jpg", Kind::Jpeg420, 256, 256, 3);
  ImageFolderOptions o;
  o.folder = dir.str();
  o.height = 256, o.width = 256;
  o.augment = false;
  const auto ds = data::open_image_folder(o);
  const core::Shape g{1, 3, 256, 256};
  const std::vector<std::int64_t> samples = {0};
  ds->load_samples(samples, Layout::replicated(DeviceMesh(), g), 0, nullptr);
  const data::DataStats full = ds->stats(0);
  REQUIRE(full.pixels_decoded >= 256 * 256);
  REQUIRE(full.pixels_total == 256 * 256);
  REQUIRE(full.files == 1);
  REQUIRE(full.samples == 1);
  REQUIRE(full.bytes_read > 0);
  const Layout sp(DeviceMesh({4}, {"sp"}), g, {Shard(2)});
  for (int r = 0; r < 4; ++r) {
    ds->load_samples(samples, sp, r, nullptr);
    const data::DataStats s = ds->stats(r);  // rank 0 also holds the unsharded load
    INFO("rank " << r << " decoded " << s.pixels_decoded);
    if (r > 0) REQUIRE(s.pixels_decoded <= full.pixels_decoded * 4 / 10);  // 1/4 plus iMCU rows
  }
  REQUIRE(ds->stats(-1).samples == 5);
}

TEST_CASE("image folder: bad folders and files are refused with what to do", "[images]") {
  TempDir dir;
  ImageFolderOptions o;
  o.folder = dir.str();
  o.height = 8, o.width = 8;
  REQUIRE_THAT(error_of([&] { data::open_image_folder(o); }),
               Contains("no images in") && Contains("one folder per class"));
  test::write_file(dir.path / "loose.png", "x");
  REQUIRE_THAT(error_of([&] { data::open_image_folder(o); }), Contains("no images in"));

  TempDir cls;
  ImageFolderOptions c = class_folder(cls.path, Kind::Png8);
  c.num_classes = 1;
  REQUIRE_THAT(error_of([&] { data::open_image_folder(c); }),
               Contains("2 class folders") && Contains("num_classes"));
  c.num_classes = 0;
  REQUIRE(data::open_image_folder(c)->num_classes() == 2);
  test::write_file(cls.path / "a" / "notes.txt", "not an image");
  REQUIRE_THAT(error_of([&] { data::open_image_folder(c); }),
               Contains("notes.txt") && Contains("remove it"));
  fs::remove(cls.path / "a" / "notes.txt");
  test::write_file(cls.path / "a" / ".hidden.png", "ignored");
  REQUIRE(data::open_image_folder(c)->size() == 4);

  auto truncate = [](const fs::path& p) {
    const auto bytes = fs::file_size(p);
    fs::resize_file(p, bytes - bytes / 3);
  };
  fs::copy_file(cls.path / "a" / "img0.png", cls.path / "a" / "zcut.png");
  truncate(cls.path / "a" / "zcut.png");
  REQUIRE_THAT(error_of([&] { data::open_image_folder(c); }),
               Contains("zcut.png") && Contains("skip_bad_samples"));
  write_image(cls.path / "b" / "zcut.jpg", Kind::Jpeg420, 30, 30, 1);
  truncate(cls.path / "b" / "zcut.jpg");
  c.skip_bad_samples = true;
  const auto skipped = data::open_image_folder(c);
  REQUIRE(skipped->size() == 4);
  REQUIRE(skipped->stats(-1).bad_skipped == 2);
  REQUIRE(skipped->stats(3).bad_skipped == 2);
  fs::remove(cls.path / "a" / "zcut.png");
  c.skip_bad_samples = false;
  REQUIRE_THAT(error_of([&] { data::open_image_folder(c); }), Contains("zcut.jpg"));

  o.height = 0;
  REQUIRE_THAT(error_of([&] { data::open_image_folder(o); }), Contains("must be positive"));
  o.height = 8, o.channels = 1;
  REQUIRE_THAT(error_of([&] { data::open_image_folder(o); }), Contains("one value per channel"));
}

TEST_CASE("image folder: segmentation pairs, mask sizes and values are checked", "[images]") {
  TempDir dir;
  ImageFolderOptions o = seg_folder(dir.path, Kind::Png8, false);
  write_image(dir.path / "images" / "lonely.png", Kind::Png8, 20, 20, 1);
  REQUIRE_THAT(error_of([&] { data::open_image_folder(o); }),
               Contains("lonely.png") && Contains("has no mask"));
  write_mask(dir.path / "masks" / "lonely.png", 21, 20, 5, 255, false, 1);
  REQUIRE_THAT(error_of([&] { data::open_image_folder(o); }),
               Contains("lonely.png") && Contains("its image's size"));
  write_image(dir.path / "masks" / "lonely.png", Kind::Png8, 20, 20, 1);  // RGB
  REQUIRE_THAT(error_of([&] { data::open_image_folder(o); }),
               Contains("lonely.png") && Contains("gray or palette"));
  fs::remove(dir.path / "images" / "lonely.png");
  REQUIRE_THAT(error_of([&] { data::open_image_folder(o); }),
               Contains("lonely.png") && Contains("has no image"));
  o.skip_bad_samples = true;
  REQUIRE(data::open_image_folder(o)->size() == 3);
  REQUIRE(data::open_image_folder(o)->stats().bad_skipped == 1);
  fs::remove(dir.path / "masks" / "lonely.png");
  o.num_classes = 0;
  o.skip_bad_samples = false;
  REQUIRE_THAT(error_of([&] { data::open_image_folder(o); }),
               Contains("segmentation needs num_classes"));

  // Values 0..4 in the masks: with 3 classes, 3 and 4 are bad.
  o.num_classes = 3;
  const auto ds = data::open_image_folder(o);
  const core::Shape g{3, 3, o.height, o.width};
  const std::vector<std::int64_t> samples = {0, 1, 2};
  REQUIRE_THAT(
      error_of([&] { ds->load_samples(samples, Layout::replicated(DeviceMesh(), g), 0, nullptr); }),
      Contains("masks/s0.png") && Contains("num_classes is 3"));
  o.skip_bad_samples = true;
  const auto lenient = data::open_image_folder(o);
  const data::Batch b =
      lenient->load_samples(samples, Layout::replicated(DeviceMesh(), g), 0, nullptr);
  const auto files = data::image_folder_files(*lenient);
  std::int64_t bad = 0;
  for (int n = 0; n < 3; ++n) {
    const RefSample ref = reference(o, files[n], n, 0);
    check_row(b, n, ref, o, Task::Segment);
    bad += std::count(ref.labels.begin(), ref.labels.end(), -1);
  }
  REQUIRE(lenient->stats(0).labels_ignored > 0);
  REQUIRE(lenient->stats(0).labels_ignored < bad);  // the rest were 255 (ignore)
}

TEST_CASE("image folder: corrupt data inside a file is found at load", "[images]") {
  const bool segment = GENERATE(false, true);
  const Kind kind = GENERATE(Kind::Png8, Kind::Jpeg420);
  TempDir dir;
  ImageFolderOptions o = segment ? seg_folder(dir.path, kind, true) : class_folder(dir.path, kind);
  const std::string name =
      std::string(segment ? "s1" : "img1") + (kind == Kind::Png8 ? ".png" : ".jpg");
  const fs::path victim = segment ? dir.path / "images" / name : dir.path / "b" / name;
  {  // damage the middle of the pixel data (PNG: IDAT bytes; JPEG: stray markers in the entropy
     // data after the start of scan), leaving the header and the end intact
    std::ifstream in(victim, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t start = kind == Kind::Png8 ? 0 : bytes.rfind("\xff\xda");
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(start + (bytes.size() - start) / 2));
    f.write(kind == Kind::Png8 ? "\x13\x57\x9b\xdf\x02\x46\x8a\xce" : "\xff\xd3\xff\xd3",
            kind == Kind::Png8 ? 8 : 4);
  }
  const auto strict = data::open_image_folder(o);
  REQUIRE(strict->size() == (segment ? 3 : 4));
  const core::Shape g{2, 3, o.height, o.width};
  const std::vector<std::int64_t> samples = {0, segment ? 1 : 2};  // the victim second
  const Layout whole = Layout::replicated(DeviceMesh(), g);
  REQUIRE_THAT(error_of([&] { strict->load_samples(samples, whole, 0, nullptr); }),
               Contains(victim.filename().string()) && Contains("skip_bad_samples"));
  o.skip_bad_samples = true;
  const auto lenient = data::open_image_folder(o);
  const data::Batch b = lenient->load_samples(samples, whole, 0, nullptr);
  REQUIRE(lenient->stats(0).bad_skipped == 1);
  const std::int64_t per = segment ? o.height * o.width : 1;
  for (std::int64_t i = 0; i < per; ++i) REQUIRE(b.labels.data<std::int64_t>()[per + i] == -1);
  REQUIRE(b.images.at<float>({1, 0, 0, 0}) == 0.0f);
  if (!segment) REQUIRE(b.labels.data<std::int64_t>()[0] == 0);
  const Layout sp(DeviceMesh({2}, {"sp"}), g, {Shard(3)});
  if (segment) {
    REQUIRE_NOTHROW(lenient->load_samples(samples, sp, 1, nullptr));
  } else {
    REQUIRE_THAT(error_of([&] { lenient->load_samples(samples, sp, 1, nullptr); }),
                 Contains(name) && Contains("split over ranks"));
  }
}

TEST_CASE("image folder: loads from several threads at once equal serial loads", "[images]") {
  TempDir dir;
  ImageFolderOptions o = seg_folder(dir.path, Kind::Jpeg420, true, 101, 22);
  o.height = 22, o.width = 101;
  o.scale_max = 1.4;
  const auto ds = data::open_image_folder(o);
  const core::Shape g{2, 3, o.height, o.width};
  const Layout l(DeviceMesh({4}, {"sp"}), g, {Shard(3)});
  const std::vector<std::int64_t> samples = {2, 1};
  std::vector<std::string> serial, threaded(4);
  for (int r = 0; r < 4; ++r)
    serial.push_back(test::bytes_of(ds->load_samples(samples, l, r, nullptr).images));
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back(
        [&, r] { threaded[r] = test::bytes_of(ds->load_samples(samples, l, r, nullptr).images); });
  for (auto& t : threads) t.join();
  REQUIRE(threaded == serial);
  REQUIRE(ds->stats(-1).samples == 16);
  REQUIRE(ds->stats(2).samples == 4);
}
