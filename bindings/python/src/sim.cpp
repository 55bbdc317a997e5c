// The simulator from Python: topologies (presets, JSON), one simulated training iteration
// (run::simulate, as `tessera sim run`), the planner (as `tessera plan`) and Chrome-trace export.
// The run description arrives as JSON (RunSpec::from_json checks it); results are the run layer's
// one JSON form (run::SimRun::to_json, run::PlanRun::to_json) turned into dicts, the keys of
// `tessera sim run --json` and `tessera plan --json`.
#include <sstream>

#include "common.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/run/phase_compare.hpp"
#include "tessera/run/plan.hpp"
#include "tessera/run/simulate.hpp"
#include "tessera/sim/topology.hpp"
#include "tessera/sim/units.hpp"

namespace tessera::python {

namespace {

/// Parsed JSON text as Python data (json.loads).
py::object loads(const std::string& text) { return py::module_::import("json").attr("loads")(text); }

std::vector<std::string> strings_of(const py::object& o) {
  if (py::isinstance<py::str>(o)) {
    std::vector<std::string> out;
    std::stringstream ss(o.cast<std::string>());
    for (std::string x; std::getline(ss, x, ',');)
      if (!x.empty()) out.push_back(x);
    return out;
  }
  return o.cast<std::vector<std::string>>();
}

}  // namespace

void bind_sim(py::module_& m) {
  py::module_ s = m.def_submodule("_sim", "C++ side of tessera.sim");
  py::class_<sim::Topology>(s, "Topology", "A cluster: devices, switches, NICs and links.")
      .def_static("preset", py::overload_cast<const std::string&>(&sim::Topology::preset), py::arg("name"),
                  "A preset: dgx-a100, dgx-h100, hgx-h200, rtx4090x4, cpu-host, 'dgx-a100:N', ...")
      .def_static("from_json", [](const std::string& text) { return sim::Topology::from_json(text, "Topology.from_json"); },
                  py::arg("text"))
      .def_static("load", [](const std::string& spec) { return run::load_topology(spec); }, py::arg("spec"),
                   "A preset name or a topology JSON file.")
      .def_static("preset_names", &sim::Topology::preset_names)
      .def_readwrite("name", &sim::Topology::name)
      .def_property_readonly("num_devices", [](const sim::Topology& t) { return t.devices().size(); })
      .def("describe", &sim::Topology::describe)
      .def("to_json", &sim::Topology::to_json)
      .def("__repr__", [](const sim::Topology& t) { return "Topology('" + t.name + "': " + t.describe() + ")"; });

  py::class_<run::SimRun>(s, "SimResult", "One simulated training iteration.")
      .def_property_readonly("iteration_time_s",
                             [](const run::SimRun& r) { return static_cast<double>(r.result.iteration_ps) / 1e12; })
      .def_property_readonly("iteration_ps", [](const run::SimRun& r) { return r.result.iteration_ps; })
      .def_property_readonly("simulated_ranks", [](const run::SimRun& r) { return r.result.simulated_ranks; })
      .def_property_readonly("devices", [](const run::SimRun& r) -> py::object { return loads(r.to_json())["devices"]; },
                             "Per rank: memory peaks by category, capacity, busy times (dicts).")
      .def_property_readonly("links", [](const run::SimRun& r) -> py::object { return loads(r.to_json())["links"]; },
                             "Links that carried data, busiest first (dicts).")
      .def("to_json", &run::SimRun::to_json, "The result as JSON text: what `tessera sim run --json` prints.")
      .def("to_dict", [](const run::SimRun& r) { return loads(r.to_json()); },
           "The result as plain data: to_json() parsed, the keys of `tessera sim run --json`.")
      .def("trace_events", [](const run::SimRun& r) {
        py::list l;
        for (const core::TraceEvent& e : r.result.trace) {
          if (e.ph != 'X') continue;
          py::dict d;
          d["name"] = e.name;
          d["cat"] = e.cat;
          d["pid"] = e.pid;
          d["tid"] = e.tid;
          d["ts_us"] = e.ts_us;
          d["dur_us"] = e.dur_us;
          d["op"] = e.op;
          d["layer"] = e.layer;
          l.append(d);
        }
        return l;
      }, "The timeline's complete events (ph 'X') as dicts: name, cat, pid (rank), tid (lane), ts_us, dur_us.")
      .def("trace_json", [](const run::SimRun& r) { return r.trace_json("tessera.sim.simulate"); },
           "The timeline as Chrome-trace JSON text (Perfetto, the studio).")
      .def("write_trace", [](const run::SimRun& r, const std::string& path) {
             core::write_file_atomic(path, r.trace_json("tessera.sim.simulate"));
           }, py::arg("path"), "Writes the Chrome trace to `path` (atomically).");

  s.def(
      "simulate",
      [](const std::string& spec_json, bool trace) {
        const run::RunSpec spec =
            run::RunSpec::from_json(spec_json, run::RunSpec::for_simulation(), "tessera.sim.simulate");
        py::gil_scoped_release nogil;
        // As `tessera sim run`: one simulated slab per kind of equivalent ranks, except for a
        // trace, where every rank is simulated so that each device has its lanes.
        return run::simulate(spec, trace, "tessera.sim.simulate");
      },
      py::arg("spec_json"), py::arg("trace"),
      "Simulates the run description `spec_json` (RunSpec JSON over the defaults of tessera sim run).");

  s.def(
      "plan",
      [](const std::string& spec_json, int devices, const py::object& shards,
         const py::object& checkpointing, const std::string& memory_cap,
         const py::object& precisions, const py::object& compressions, bool exhaustive,
         int threads) {
        const run::RunSpec spec =
            run::RunSpec::from_json(spec_json, run::RunSpec::for_simulation(), "tessera.sim.plan");
        run::PlanChoices c;
        c.devices = devices;
        c.memory_cap = memory_cap;
        c.shards = strings_of(shards);
        c.checkpointing = strings_of(checkpointing);
        c.precisions = strings_of(precisions);
        c.compressions = strings_of(compressions);
        c.exhaustive = exhaustive;
        c.threads = threads;
        std::string record;
        {
          py::gil_scoped_release nogil;
          record = run::plan(spec, c).to_json();
        }
        return loads(record);
      },
      py::arg("spec_json"), py::arg("devices"), py::arg("shards"), py::arg("checkpointing"),
      py::arg("memory_cap"), py::arg("precisions"), py::arg("compressions"),
      py::arg("exhaustive") = false, py::arg("threads") = 0,
      "run::plan's record (run::PlanRun::to_json, docs/records.md \"Plan\") as a dict: `tessera "
      "plan --json`.");
  s.def(
      "compare",
      [](const std::string& measured, const std::string& simulated, const std::string& spec_json) {
        run::Comparison c;
        if (!simulated.empty()) {
          c = run::compare_trace_files(measured, simulated);
        } else {
          const run::RunSpec spec =
              run::RunSpec::from_json(spec_json, run::RunSpec::for_simulation(), "tessera.sim.compare");
          py::gil_scoped_release nogil;
          c = run::compare_with_simulation(measured, spec);
        }
        return loads(c.to_json());
      },
      py::arg("measured"), py::arg("simulated"), py::arg("spec_json"),
      "run::Comparison::to_json as a dict: a measured trace file against a simulated trace file, or against "
      "the simulation of the run description.");
  s.def("device_names", [] { return sim::DeviceCatalog().names(); }, "Device models of the built-in catalog.");
}

}  // namespace tessera::python
