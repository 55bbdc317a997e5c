// What `tessera sim run` simulates on — the device catalog, the engine options and the topology,
// with a `tessera calibrate` file applied — built in one place for the CLI and the studio.
#pragma once

#include <string>

#include "tessera/sim/devices.hpp"
#include "tessera/sim/engine.hpp"
#include "tessera/sim/topology.hpp"

namespace tessera::tools {

/// A topology preset name, or a path to a topology JSON file when one exists there.
sim::Topology load_topology(const std::string& spec);
/// The same, with devices (the cpu-host presets' links) from `catalog`.
sim::Topology load_topology(const std::string& spec, const sim::DeviceCatalog& catalog);

/// The built-in catalog and default engine options, a calibration applied over them
/// (sim::apply_calibration), and the topology loaded from that catalog and checked against it.
struct SimSetup {
  sim::DeviceCatalog catalog;
  sim::EngineOptions options;
  sim::Topology topology;
};

/// `topology`: a preset or a topology JSON file; `calibration`: a `tessera calibrate` file, or
/// empty for none. Throws InvalidArgument with the loader's message (naming the file and the
/// field) for a missing or malformed calibration or topology.
SimSetup make_sim_setup(const std::string& topology, const std::string& calibration);

}  // namespace tessera::tools
