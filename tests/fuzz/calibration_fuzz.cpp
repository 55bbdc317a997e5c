// Fuzz target: calibration files (sim::calibration_from_json), and the round trip through
// calibration_to_json.
#include <string>

#include "fuzz_support.hpp"
#include "tessera/sim/calibration.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return tessera::fuzz::run_one("calibration", [&] {
    const tessera::sim::Calibration c = tessera::sim::calibration_from_json(text, "fuzz input");
    const std::string again = tessera::sim::calibration_to_json(c);
    try {
      (void)tessera::sim::calibration_from_json(again, "round trip");
    } catch (const tessera::Error& e) {
      tessera::fuzz::finding("calibration", std::string("an accepted calibration does not read back: ") + e.what());
    }
  });
}
