// Fuzz target: topology JSON (sim::Topology::from_json), and the round trip through to_json.
#include <string>

#include "fuzz_support.hpp"
#include "tessera/sim/topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return tessera::fuzz::run_one("topology_json", [&] {
    const tessera::sim::Topology topo = tessera::sim::Topology::from_json(text, "fuzz input");
    const std::string again = topo.to_json();
    try {
      (void)tessera::sim::Topology::from_json(again, "round trip");
    } catch (const tessera::Error& e) {
      tessera::fuzz::finding("topology_json", std::string("an accepted topology does not read back: ") + e.what());
    }
  });
}
