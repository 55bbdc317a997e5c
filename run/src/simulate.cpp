// simulate(): replay_folded + simulate_iteration; SimRun's JSON form and Chrome trace.
#include "tessera/run/simulate.hpp"

#include <nlohmann/json.hpp>
#include <sstream>

#include "tessera/core/file_io.hpp"
#include "tessera/core/trace.hpp"
#include "tessera/sim/fold.hpp"
#include "tessera/sim/units.hpp"

namespace tessera::run {

using Json = nlohmann::ordered_json;

std::string result_json(const SimSetup& setup, const sim::SimResult& r) {
  Json o;
  o["model"] = setup.train.model.name;
  o["mesh"] = setup.mesh.to_string();
  o["topology"] = setup.topology.name;
  o["iteration_time_s"] = static_cast<double>(r.iteration_ps) / sim::kPicosPerSecond;
  o["iteration_ps"] = r.iteration_ps;
  o["simulated_ranks"] = r.simulated_ranks;
  Json devices = Json::array();
  for (const sim::DeviceResult& d : r.devices) {
    Json e;
    e["rank"] = d.rank;
    e["coords"] = setup.mesh.coords_of(d.rank);
    e["device"] = d.device;
    e["simulated_as"] = d.simulated_as;
    e["peak_memory_bytes"] = d.memory.peak_total;
    Json mem = Json::object();
    for (int c = 0; c < core::kNumMemCategories; ++c)
      mem[std::string(core::mem_category_name(static_cast<core::MemCategory>(c)))] = d.memory.peak[c];
    e["memory_bytes"] = mem;
    e["capacity_bytes"] = setup.catalog.get(d.device).capacity_bytes;
    e["compute_busy_s"] = static_cast<double>(d.compute_busy_ps) / sim::kPicosPerSecond;
    e["comm_busy_s"] = static_cast<double>(d.comm_busy_ps) / sim::kPicosPerSecond;
    devices.push_back(e);
  }
  o["devices"] = devices;
  Json links = Json::array();
  for (const sim::LinkUse& u : r.links)
    links.push_back({{"from", u.from}, {"to", u.to}, {"kind", u.kind}, {"bytes", u.bytes}, {"utilisation", u.utilisation}});
  o["links"] = links;
  return o.dump(1);
}

std::string SimRun::to_json() const { return result_json(setup, result); }

std::string SimRun::trace_json(const std::string& source) const {
  std::ostringstream os;
  core::write_chrome_trace(os, result.trace, result.process_names,
                           {{"source", source}, {"model", setup.train.model.name},
                            {"mesh", setup.mesh.to_string()}, {"topology", setup.topology.name},
                            {"input", core::shape_str(setup.train.input)}});
  return os.str();
}

SimRun simulate(SimSetup setup, bool every_rank, bool keep_trace) {
  SimRun run;
  sim::EngineOptions eo = setup.engine;
  eo.trace = keep_trace;
  // One replay per class of equivalent ranks (fold.hpp): exactly what replaying every rank gives.
  const sim::FoldedReplay folded = sim::replay_folded(setup.train, setup.mesh, setup.mesh_comm);
  run.result = sim::simulate_iteration(folded, setup.topology, setup.catalog, eo, /*fold_engine=*/!every_rank);
  run.setup = std::move(setup);
  return run;
}

SimRun simulate(const RunSpec& spec, bool keep_trace, const std::string& source) {
  const bool trace = keep_trace || !spec.trace.empty();
  // A trace simulates every rank, so that the timeline has a lane for each device.
  SimRun run = simulate(resolve_sim(spec), /*every_rank=*/trace, trace);
  if (!spec.trace.empty()) core::write_file_atomic(spec.trace, run.trace_json(source));
  return run;
}

}  // namespace tessera::run
