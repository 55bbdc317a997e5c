// The .npy folder dataset: files written byte by byte here, sharded loads equal to unsharded ones
// and to the values written, and each kind of malformed folder refused with its message.
#include <cstring>

#include "support/test_utils.hpp"
#include "tessera/data/dataset.hpp"

using namespace tessera;
using Catch::Matchers::Contains;
using core::DeviceMesh;
using core::Layout;
using core::Shard;
using core::Tensor;
using data::Task;
using test::error_of;
using test::write_file;
namespace fs = std::filesystem;

namespace {

/// A scratch folder for one test's .npy files.
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("tessera_npy") {}
  std::string str() const { return path.string(); }
};

/// The bytes of an .npy file: magic, version, header dict padded with spaces to a 64-byte
/// boundary and ended by '\n', then `data`.
std::string npy_bytes(const std::string& descr, const core::Shape& shape, const std::string& data,
                      bool fortran = false, int major = 1, const std::string& magic = "\x93NUMPY") {
  std::string dims;
  for (auto d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': (" + dims + "), }";
  const std::size_t prefix = major == 1 ? 10 : 12;
  dict.append((64 - (prefix + dict.size() + 1) % 64) % 64, ' ');
  dict += '\n';
  std::string out = magic;
  out += static_cast<char>(major);
  out += '\0';
  const std::uint32_t len = static_cast<std::uint32_t>(dict.size());
  out.append(reinterpret_cast<const char*>(&len), major == 1 ? 2 : 4);
  return out + dict + data;
}

template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

/// Pixel value written for image i at (c, h, w): unique, so any misplaced read shows.
float pixel(int i, std::int64_t c, std::int64_t h, std::int64_t w) {
  return static_cast<float>(i * 10000 + c * 1000 + h * 30 + w) + 0.25f;
}

constexpr int kImages = 5, kC = 2, kH = 7, kW = 9, kClasses = 3;

/// A valid folder: img_0..img_4 (2x7x9 '<f4', the third one in .npy format 2.0) and labels.
void write_folder(const fs::path& dir, Task task) {
  for (int i = 0; i < kImages; ++i) {
    std::vector<float> px;
    for (int c = 0; c < kC; ++c)
      for (int h = 0; h < kH; ++h)
        for (int w = 0; w < kW; ++w) px.push_back(pixel(i, c, h, w));
    write_file(dir / ("img_" + std::to_string(i) + ".npy"), npy_bytes("<f4", {kC, kH, kW}, raw(px), false, i == 2 ? 2 : 1));
  }
  std::vector<std::int64_t> labels;
  if (task == Task::Classify) {
    labels = {2, 0, -1, 1, 2};
    write_file(dir / "labels.npy", npy_bytes("<i8", {kImages}, raw(labels)));
  } else {
    for (int i = 0; i < kImages * kH * kW; ++i) labels.push_back(i % 7 == 0 ? -1 : (i / 5) % kClasses);
    write_file(dir / "labels.npy", npy_bytes("<i8", {kImages, kH, kW}, raw(labels)));
  }
}

}  // namespace

TEST_CASE("npy folder: loads the values written, sharded equal to unsharded", "[dataset][npy]") {
  const Task task = GENERATE(Task::Classify, Task::Segment);
  TempDir dir;
  write_folder(dir.path, task);
  write_file(dir.path / "notes.txt", "ignored: not an .npy file");
  const auto ds = data::open_npy_folder(dir.str(), kClasses);
  REQUIRE(ds->task() == task);
  REQUIRE(ds->size() == kImages);
  REQUIRE(ds->num_classes() == kClasses);
  REQUIRE(ds->image_shape() == core::Shape{kC, kH, kW});

  const core::Shape g{4, kC, kH, kW};
  const std::int64_t step = 1;  // samples 4, 0, 1, 2
  const data::Batch whole = ds->load(step, Layout::replicated(DeviceMesh(), g), 0, nullptr);
  const int sample[4] = {4, 0, 1, 2};
  for (int n = 0; n < 4; ++n)
    for (int c = 0; c < kC; ++c)
      for (int h = 0; h < kH; ++h)
        for (int w = 0; w < kW; ++w) REQUIRE(whole.images.at<float>({n, c, h, w}) == pixel(sample[n], c, h, w));
  if (task == Task::Classify) {
    const std::int64_t expect[4] = {2, 2, 0, -1};
    for (int n = 0; n < 4; ++n) REQUIRE(whole.labels.at<std::int64_t>({n}) == expect[n]);
  } else {
    REQUIRE(whole.labels.at<std::int64_t>({1, 0, 0}) == -1);                   // flat index 0
    REQUIRE(whole.labels.at<std::int64_t>({0, 1, 2}) == ((4 * 63 + 11) / 5) % kClasses);  // flat 263
  }

  const std::vector<Layout> layouts = {
      Layout(DeviceMesh({3}, {"sp"}), g, {Shard(3)}),
      Layout(DeviceMesh({3}, {"sp"}), g, {Shard(2)}),
      Layout(DeviceMesh({2, 2}, {"sp_h", "sp_w"}), g, {Shard(2), Shard(3)}),
      Layout(DeviceMesh({3, 2}, {"dp", "sp"}), g, {Shard(0), Shard(3)}),
  };
  for (const Layout& l : layouts) {
    for (int r = 0; r < l.mesh().size(); ++r) {
      INFO("layout " << l.to_string() << " rank " << r);
      const data::Batch part = ds->load(step, l, r, nullptr);
      const auto n = l.local_range(r, 0), h = l.local_range(r, 2), w = l.local_range(r, 3);
      REQUIRE(part.images.shape() == l.local_shape(r));
      REQUIRE(test::bytes_of(part.images) == test::bytes_of(whole.images.narrow(0, n.begin, n.size())
                                                    .narrow(2, h.begin, h.size())
                                                    .narrow(3, w.begin, w.size())));
      Tensor lab = whole.labels.narrow(0, n.begin, n.size());
      if (task == Task::Segment) lab = lab.narrow(1, h.begin, h.size()).narrow(2, w.begin, w.size());
      REQUIRE(test::bytes_of(part.labels) == test::bytes_of(lab));
    }
  }
  auto meta = std::make_shared<core::Allocator>("meta", true);
  const data::Batch m = ds->load(0, layouts[3], 5, meta);
  REQUIRE(m.images.is_meta());
  REQUIRE(m.images.shape() == core::Shape{1, kC, kH, 4});
}

TEST_CASE("npy folder: malformed folders are refused with what is wrong", "[dataset][npy]") {
  TempDir dir;
  write_folder(dir.path, Task::Classify);
  const std::vector<float> px(kC * kH * kW, 1.0f);
  const fs::path img = dir.path / "img_1.npy", labels = dir.path / "labels.npy";
  std::string expected;
  SECTION("bad magic") {
    write_file(img, npy_bytes("<f4", {kC, kH, kW}, raw(px), false, 1, "\x93NUMPZ"));
    expected = "img_1.npy' is not an .npy file (bad magic";
  }
  SECTION("wrong dtype") {
    write_file(img, npy_bytes("<f8", {kC, kH, kW}, raw(std::vector<double>(kC * kH * kW)), false));
    expected = "img_1.npy' holds dtype '<f8' but little-endian float32 ('<f4') is required";
  }
  SECTION("fortran order") {
    write_file(img, npy_bytes("<f4", {kC, kH, kW}, raw(px), true));
    expected = "img_1.npy' is stored in Fortran order";
  }
  SECTION("mismatched shapes") {
    write_file(img, npy_bytes("<f4", {kC, kW, kH}, raw(px)));
    expected = "img_1.npy' has shape [2,9,7] but";
  }
  SECTION("truncated image data") {
    write_file(img, npy_bytes("<f4", {kC, kH, kW}, raw(px).substr(0, 100)));
    expected = "img_1.npy' has 100 bytes of data but its shape [2,7,9] needs more (truncated?)";
  }
  SECTION("a malformed header dict") {
    write_file(img, npy_bytes("<f4", {kC, kH, kW}, raw(px)).replace(20, 5, "xxxxx"));
    expected = "img_1.npy': malformed .npy header";
  }
  SECTION("label count mismatch") {
    write_file(labels, npy_bytes("<i8", {4}, raw(std::vector<std::int64_t>{0, 1, 2, 0})));
    expected = "labels.npy' holds 4 labels but the folder has 5 images";
  }
  SECTION("label out of range") {
    write_file(labels, npy_bytes("<i8", {5}, raw(std::vector<std::int64_t>{0, 1, 3, 0, 1})));
    expected = "labels.npy': label 3 at position 2 is outside [-1, 3)";
  }
  SECTION("labels of the wrong shape") {
    write_file(labels, npy_bytes("<i8", {5, kH}, raw(std::vector<std::int64_t>(5 * kH))));
    expected = "labels.npy' has shape [5,7]; labels must be (count) for classification or (count, 7, 9)";
  }
  SECTION("labels of the wrong dtype") {
    write_file(labels, npy_bytes("<i4", {5}, raw(std::vector<std::int32_t>(5))));
    expected = "labels.npy' holds dtype '<i4' but int64 ('<i8') is required";
  }
  SECTION("missing labels.npy") {
    fs::remove(labels);
    expected = "has no labels.npy";
  }
  SECTION("no images") {
    for (int i = 0; i < kImages; ++i) fs::remove(dir.path / ("img_" + std::to_string(i) + ".npy"));
    expected = "holds no image files";
  }
  SECTION("not a folder") {
    fs::remove_all(dir.path);
    expected = "is not a readable directory";
  }
  REQUIRE_THAT(error_of([&] { data::open_npy_folder(dir.str(), kClasses); }), Contains(expected));
}
