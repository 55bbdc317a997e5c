// Fuzz target: Chrome traces as Compare reads them (core::read_chrome_trace), and the round trip
// through write_chrome_trace.
#include <sstream>
#include <string>

#include "fuzz_support.hpp"
#include "tessera/core/trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return tessera::fuzz::run_one("chrome_trace", [&] {
    const tessera::core::ChromeTrace t = tessera::core::read_chrome_trace(text, "fuzz input");
    std::ostringstream os;
    tessera::core::write_chrome_trace(os, t.events, t.process_names, t.other);
    try {
      (void)tessera::core::read_chrome_trace(os.str(), "round trip");
    } catch (const tessera::Error& e) {
      tessera::fuzz::finding("chrome_trace", std::string("an accepted trace does not read back: ") + e.what());
    }
  });
}
