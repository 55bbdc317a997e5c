// load_topology and make_sim_setup: the catalog, engine options and topology of a simulation,
// shared by `tessera sim run` and tessera studio.
#include "sim_setup.hpp"

#include <fstream>
#include <sstream>

#include "tessera/sim/calibration.hpp"

namespace tessera::tools {

sim::Topology load_topology(const std::string& spec) { return load_topology(spec, sim::DeviceCatalog{}); }

sim::Topology load_topology(const std::string& spec, const sim::DeviceCatalog& catalog) {
  std::ifstream in(spec);
  if (!in) return sim::Topology::preset(spec, catalog);
  std::stringstream text;
  text << in.rdbuf();
  sim::Topology t = sim::Topology::from_json(text.str(), catalog, "topology file '" + spec + "'");
  if (t.name.empty()) t.name = spec;
  return t;
}

SimSetup make_sim_setup(const std::string& topology, const std::string& calibration) {
  SimSetup s;
  // Calibrate first: the cpu-host presets take the measured device's shared-memory links.
  if (!calibration.empty()) sim::apply_calibration(sim::load_calibration(calibration), s.catalog, s.options);
  s.topology = load_topology(topology, s.catalog);
  s.topology.check_devices(s.catalog);
  return s;
}

}  // namespace tessera::tools
