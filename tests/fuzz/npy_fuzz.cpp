// Fuzz target: .npy files as the npy-folder dataset reads them (data::open_npy_folder, then one
// batch). The dataset reads a folder: the input goes into a per-process scratch folder beside a
// fixed, valid partner file. The first input byte picks the role: even bytes make the rest the
// one image (a.npy, beside labels.npy holding the label 0), odd bytes make it labels.npy
// (beside a.npy, a 1x2x2 float32 image).
#include <filesystem>
#include <string>

#include "fuzz_support.hpp"
#include "tessera/core/layout.hpp"
#include "tessera/core/mesh.hpp"
#include "tessera/data/dataset.hpp"

namespace {

using tessera::fuzz::npy_bytes;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  if (size == 0) return 0;
  static const std::string dir = tessera::fuzz::scratch_path("npy");
  static const bool made = fs::create_directories(dir) || fs::is_directory(dir);
  if (!made) tessera::fuzz::finding("npy", "cannot create " + dir);
  const bool input_is_labels = data[0] % 2 == 1;
  const std::string image = dir + "/a.npy", labels = dir + "/labels.npy";
  const std::string partner =
      input_is_labels ? npy_bytes("<f4", "(1, 2, 2)", std::string(16, '\0')) : npy_bytes("<i8", "(1,)", std::string(8, '\0'));
  tessera::fuzz::write_bytes(input_is_labels ? image : labels, reinterpret_cast<const std::uint8_t*>(partner.data()),
                             partner.size());
  tessera::fuzz::write_bytes(input_is_labels ? labels : image, data + 1, size - 1);
  return tessera::fuzz::run_one("npy", [&] {
    const auto ds = tessera::data::open_npy_folder(dir, 4);
    const tessera::core::Shape s = ds->image_shape();
    const tessera::core::Shape g{1, s[0], s[1], s[2]};
    (void)ds->load(0, tessera::core::Layout::replicated(tessera::core::DeviceMesh(), g), 0, nullptr);
  });
}
