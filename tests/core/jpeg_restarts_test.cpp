// Restart markers added losslessly (tessera/data/jpeg_restarts.hpp): the rewritten JPEG has a
// marker at every requested MCU row, decodes to the same pixels as the original (checked here by
// decoding both, independently of the check add_jpeg_restarts makes itself), keeps its COM and
// APPn markers, turns progressive files sequential, and bad requests are refused by name.
#include "tessera/data/jpeg_restarts.hpp"

#include <fstream>

#include "../../core/src/data/image_decode.hpp"
#include "support/image_files.hpp"
#include "support/test_utils.hpp"

using namespace tessera;
using Catch::Matchers::Contains;
using test::error_of;
using test::read_bytes;

namespace {

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("tessera_restarts") {}
};

std::vector<std::uint8_t> full_decode(const std::string& path) {
  const auto info = data::internal::probe_image(path);
  return data::internal::decode_region(path, info, {0, info.height, 0, info.width},
                                       data::internal::DecodeMode::Color)
      .u8;
}

std::vector<std::uint8_t> picture(int w, int h, int channels, std::uint64_t seed) {
  const auto v = test::test_picture(w, h, channels, 8, seed);
  return {v.begin(), v.end()};
}

}  // namespace

TEST_CASE("Restart markers are added without changing a pixel", "[image]") {
  TempDir dir;
  std::uint64_t seed = 1;
  for (int sub : {444, 422, 420}) {
    for (bool progressive : {false, true}) {
      for (int channels : {1, 3}) {
        if (channels == 1 && sub != 444) continue;
        INFO("subsampling " << sub << " progressive " << progressive << " channels " << channels);
        const std::string in = dir.file("in.jpg"), out = dir.file("out.jpg");
        test::write_jpeg(in, {203, 157, channels, 92, sub, progressive},
                         picture(203, 157, channels, ++seed));
        const data::JpegRestarts before = data::jpeg_restarts(in);
        CHECK(before.interval == 0);
        CHECK(before.row_step == 0);
        CHECK(before.sequential == !progressive);
        for (int rows : {1, 3}) {
          const data::RestartRewrite r = data::add_jpeg_restarts(in, out, rows);
          CHECK(r.bytes_in == static_cast<std::int64_t>(read_bytes(in).size()));
          CHECK(r.bytes_out == static_cast<std::int64_t>(read_bytes(out).size()));
          CHECK(r.was_progressive == progressive);
          const data::JpegRestarts after = data::jpeg_restarts(out);
          CHECK(after.sequential);
          CHECK(after.row_step == rows);
          CHECK(after.interval == rows * after.mcus_per_row);
          const int mcu_h = channels == 3 && sub == 420 ? 16 : 8;
          CHECK(after.mcu_rows == (157 + mcu_h - 1) / mcu_h);
          CHECK(full_decode(out) == full_decode(in));
        }
      }
    }
  }
}

TEST_CASE("Adding restart markers keeps comments, works in place and refuses bad requests",
          "[image]") {
  TempDir dir;
  const std::string in = dir.file("c.jpg");
  test::JpegExtras extras;
  extras.comment = "camera 3, 2026-12-07";
  test::write_jpeg(in, {64, 48, 3, 90, 420, false}, picture(64, 48, 3, 5), extras);
  const auto before = full_decode(in);
  data::add_jpeg_restarts(in, in, 2);  // in place
  CHECK(read_bytes(in).find("camera 3, 2026-12-07") != std::string::npos);
  CHECK(data::jpeg_restarts(in).row_step == 2);
  CHECK(full_decode(in) == before);
  // Once more: the markers are replaced, not stacked.
  data::add_jpeg_restarts(in, in, 1);
  CHECK(data::jpeg_restarts(in).row_step == 1);
  CHECK(full_decode(in) == before);

  CHECK_THAT(error_of([&] { data::add_jpeg_restarts(in, dir.file("x.jpg"), 0); }),
             Contains("1 to 65535"));
  const std::string png = dir.file("p.png");
  test::write_png(png, {8, 8, 3, 8, false, {}}, test::test_picture(8, 8, 3, 8, 1));
  CHECK_THAT(error_of([&] { data::add_jpeg_restarts(png, dir.file("x.jpg")); }),
             Contains(png) && Contains("not a JPEG"));
  const std::string bytes = read_bytes(in);
  test::write_file(dir.file("cut.jpg"), bytes.substr(0, bytes.size() / 2));
  CHECK_THAT(error_of([&] { data::add_jpeg_restarts(dir.file("cut.jpg"), dir.file("x.jpg")); }),
             Contains("cut.jpg") && Contains("truncated"));
  CHECK_THAT(error_of([&] { data::add_jpeg_restarts(dir.file("none.jpg"), dir.file("x.jpg")); }),
             Contains("none.jpg"));
  CHECK_THAT(error_of([&] { data::jpeg_restarts(png); }), Contains(png));
  CHECK_FALSE(std::ifstream(dir.file("x.jpg")).good());  // nothing half-written
}
