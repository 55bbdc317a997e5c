// Fuzz target: device files (sim::DeviceCatalog::add_from_json), and the round trip through
// to_json into a fresh catalog.
#include <string>

#include "fuzz_support.hpp"
#include "tessera/sim/devices.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return tessera::fuzz::run_one("devices", [&] {
    tessera::sim::DeviceCatalog catalog;
    catalog.add_from_json(text, "fuzz input");
    const std::string again = catalog.to_json();
    try {
      tessera::sim::DeviceCatalog fresh;
      fresh.add_from_json(again, "round trip");
    } catch (const tessera::Error& e) {
      tessera::fuzz::finding("devices", std::string("an accepted device file does not read back: ") + e.what());
    }
  });
}
