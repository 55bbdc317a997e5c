// The simulator from Python: topologies (presets, JSON), one simulated training iteration (the
// same calls as `tessera sim run`), the planner (as `tessera plan`) and Chrome-trace export.
// Results are plain dicts with the CLI's --json keys, so both can be compared field by field.
#include <sstream>

#include "common.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/core/trace.hpp"
#include "tessera/sim/engine.hpp"
#include "tessera/sim/fold.hpp"
#include "tessera/sim/planner.hpp"
#include "tessera/sim/topology.hpp"
#include "tessera/sim/units.hpp"
#include "sim_setup.hpp"
#include "train_run.hpp"

namespace tessera::python {

namespace {

/// A simulated iteration plus what describes it (for to_dict and the trace's otherData).
struct SimRun {
  sim::SimResult result;
  std::string model, mesh, topology;
  core::DeviceMesh device_mesh;
  std::vector<double> capacity_bytes;  ///< per rank
};

/// The topology argument: a Topology, a preset name or a JSON file path.
sim::Topology topology_of(const py::object& o) {
  if (py::isinstance<sim::Topology>(o)) return sim::Topology::from_json(o.cast<const sim::Topology&>().to_json());
  return tools::load_topology(o.cast<std::string>());  // as the CLI's --topology
}

tools::TrainArgs train_args(const std::string& model, const std::string& input, int batch, const std::string& mesh,
                            const std::string& shard, const std::string& checkpointing,
                            const std::string& optimizer, const std::string& task, int classes, bool overlap) {
  tools::TrainArgs a;  // the defaults of `tessera sim run` / `tessera plan`
  a.model = model;
  a.input = input;
  a.batch = batch;
  a.mesh = mesh;
  a.shard = shard;
  a.checkpointing = checkpointing;
  a.optimizer = optimizer;
  a.task = task;
  a.classes = classes;
  a.steps = 1;
  a.no_overlap = !overlap;
  return a;
}

py::dict device_dict(const sim::DeviceResult& d, const core::DeviceMesh& mesh) {
  py::dict e;
  e["rank"] = d.rank;
  e["coords"] = mesh.coords_of(d.rank);
  e["device"] = d.device;
  e["peak_memory_bytes"] = d.memory.peak_total;
  py::dict mem;
  for (int c = 0; c < core::kNumMemCategories; ++c)
    mem[py::str(std::string(core::mem_category_name(static_cast<core::MemCategory>(c))))] = d.memory.peak[c];
  e["memory_bytes"] = mem;
  e["compute_busy_s"] = static_cast<double>(d.compute_busy_ps) / 1e12;
  e["comm_busy_s"] = static_cast<double>(d.comm_busy_ps) / 1e12;
  e["simulated_as"] = d.simulated_as;
  return e;
}

py::list devices_list(const SimRun& s) {
  py::list l;
  for (std::size_t i = 0; i < s.result.devices.size(); ++i) {
    py::dict d = device_dict(s.result.devices[i], s.device_mesh);
    d["capacity_bytes"] = s.capacity_bytes.at(i);
    l.append(d);
  }
  return l;
}

py::list links_list(const SimRun& s) {
  py::list l;
  for (const sim::LinkUse& u : s.result.links) {
    py::dict d;
    d["from"] = u.from;
    d["to"] = u.to;
    d["kind"] = u.kind;
    d["bytes"] = u.bytes;
    d["utilisation"] = u.utilisation;
    l.append(d);
  }
  return l;
}

std::string trace_json(const SimRun& s) {
  std::ostringstream os;
  core::write_chrome_trace(os, s.result.trace, s.result.process_names,
                           {{"source", "tessera.sim.simulate"}, {"model", s.model}, {"mesh", s.mesh},
                            {"topology", s.topology}});
  return os.str();
}

py::dict plan_config(const sim::PlanConfig& c) {
  py::dict d;
  d["mesh"] = c.mesh;
  d["shard"] = c.shard;
  d["checkpointing"] = c.checkpointing;
  return d;
}

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
      .def_static("load", py::overload_cast<const std::string&>(&tools::load_topology), py::arg("spec"),
                   "A preset name or a topology JSON file.")
      .def_static("preset_names", &sim::Topology::preset_names)
      .def_readwrite("name", &sim::Topology::name)
      .def_property_readonly("num_devices", [](const sim::Topology& t) { return t.devices().size(); })
      .def("describe", &sim::Topology::describe)
      .def("to_json", &sim::Topology::to_json)
      .def("__repr__", [](const sim::Topology& t) { return "Topology('" + t.name + "': " + t.describe() + ")"; });

  py::class_<SimRun>(s, "SimResult", "One simulated training iteration.")
      .def_property_readonly("iteration_time_s",
                             [](const SimRun& r) { return static_cast<double>(r.result.iteration_ps) / 1e12; })
      .def_property_readonly("iteration_ps", [](const SimRun& r) { return r.result.iteration_ps; })
      .def_property_readonly("simulated_ranks", [](const SimRun& r) { return r.result.simulated_ranks; })
      .def_property_readonly("devices", &devices_list, "Per rank: memory peaks by category, busy times (dicts).")
      .def_property_readonly("links", &links_list, "Links that carried data, busiest first (dicts).")
      .def("to_dict", [](const SimRun& r) {
        py::dict d;
        d["model"] = r.model;
        d["mesh"] = r.mesh;
        d["topology"] = r.topology;
        d["iteration_time_s"] = static_cast<double>(r.result.iteration_ps) / 1e12;
        d["devices"] = devices_list(r);
        d["links"] = links_list(r);
        return d;
      }, "The result as plain data, with the keys of `tessera sim run --json`.")
      .def("trace_events", [](const SimRun& r) {
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
      .def("trace_json", &trace_json, "The timeline as Chrome-trace JSON text (Perfetto, the studio).")
      .def("write_trace", [](const SimRun& r, const std::string& path) { core::write_file_atomic(path, trace_json(r)); },
           py::arg("path"), "Writes the Chrome trace to `path` (atomically).");

  s.def(
      "simulate",
      [](const std::string& model, const std::string& input, int batch, const std::string& mesh,
         const py::object& topology, const std::string& shard, const std::string& checkpointing,
         const std::string& optimizer, const std::string& task, int classes, const std::string& device,
         bool tf32, int bucket_mib, bool overlap, bool trace) {
        tools::TrainRunConfig cfg = tools::make_train_config(
            train_args(model, input, batch, mesh, shard, checkpointing, optimizer, task, classes, overlap));
        TESSERA_CHECK(bucket_mib >= 1, "simulate: bucket_mib=", bucket_mib, " must be at least 1");
        cfg.train.bucket_bytes = std::size_t(bucket_mib) << 20;
        sim::DeviceCatalog catalog;
        const sim::Topology topo = topology_of(topology);
        topo.check_devices(catalog);
        if (!device.empty()) catalog.get(device);  // an unknown name fails here, naming the devices
        sim::EngineOptions eo;
        eo.device = device;
        eo.tf32 = tf32;
        eo.trace = trace;
        SimRun run;
        {
          py::gil_scoped_release nogil;
          const sim::FoldedReplay folded = sim::replay_folded(cfg.train, cfg.mesh);
          // As `tessera sim run`: one simulated slab per kind of equivalent ranks, except for a
          // trace, where every rank is simulated so that each device has its lanes.
          run.result = sim::simulate_iteration(folded, topo, catalog, eo, /*fold_engine=*/!trace);
        }
        run.model = cfg.train.model.name;
        run.mesh = cfg.mesh.to_string();
        run.topology = topo.name;
        run.device_mesh = cfg.mesh;
        for (const sim::DeviceResult& d : run.result.devices) run.capacity_bytes.push_back(catalog.get(d.device).capacity_bytes);
        return run;
      },
      py::arg("model"), py::arg("input"), py::arg("batch"), py::arg("mesh"), py::arg("topology"), py::arg("shard"),
      py::arg("checkpointing"), py::arg("optimizer"), py::arg("task"), py::arg("classes"), py::arg("device"),
      py::arg("tf32"), py::arg("bucket_mib"), py::arg("overlap"), py::arg("trace"));

  s.def(
      "plan",
      [](const std::string& model, const std::string& input, int batch, const py::object& topology, int devices,
         const py::object& shards, const py::object& checkpointing, const std::string& memory_cap,
         const std::string& optimizer, const std::string& task, int classes, const std::string& device, bool tf32,
         int bucket_mib, bool overlap) {
        tools::TrainRunConfig cfg = tools::make_train_config(
            train_args(model, input, batch, "sp=1", "W", "none", optimizer, task, classes, overlap));
        TESSERA_CHECK(bucket_mib >= 1, "plan: bucket_mib=", bucket_mib, " must be at least 1");
        cfg.train.bucket_bytes = std::size_t(bucket_mib) << 20;
        sim::PlanOptions o;
        o.train = cfg.train;
        o.devices = devices;
        o.shards = strings_of(shards);
        o.checkpointing = strings_of(checkpointing);
        for (const std::string& x : o.shards)
          TESSERA_CHECK(x == "W" || x == "H" || x == "HW", "plan: shards ", x, ": list W, H and/or HW");
        if (!memory_cap.empty()) o.memory_cap_bytes = static_cast<double>(sim::parse_byte_size(memory_cap));
        sim::DeviceCatalog catalog;
        if (!device.empty()) catalog.get(device);
        o.engine.device = device;
        o.engine.tf32 = tf32;
        const sim::Topology topo = topology_of(topology);
        topo.check_devices(catalog);
        sim::PlanResult r;
        {
          py::gil_scoped_release nogil;
          r = sim::plan(o, topo, catalog);
        }
        py::dict d;
        d["model"] = o.train.model.name;
        d["input"] = input;
        d["batch"] = o.train.batch;
        d["topology"] = topo.name;
        d["devices"] = r.devices;
        d["memory_cap_bytes"] = o.memory_cap_bytes;
        d["best_fit"] = r.best_fit();
        py::list entries, skipped;
        for (const sim::PlanEntry& e : r.entries) {
          py::dict x = plan_config(e.config);
          x["iteration_time_s"] = e.iteration_s;
          x["images_per_s"] = e.images_per_s;
          x["peak_memory_bytes"] = e.peak_bytes;
          x["activation_peak_bytes"] = e.activation_peak_bytes;
          x["limit_bytes"] = e.limit_bytes;
          x["fits"] = e.fits;
          x["compute_busy_s"] = e.compute_busy_s;
          x["comm_busy_s"] = e.comm_busy_s;
          x["replayed_ranks"] = e.classes;
          entries.append(x);
        }
        for (const sim::PlanSkip& k : r.skipped) {
          py::dict x = plan_config(k.config);
          x["reason"] = k.reason;
          skipped.append(x);
        }
        d["configurations"] = entries;
        d["skipped"] = skipped;
        return d;
      },
      py::arg("model"), py::arg("input"), py::arg("batch"), py::arg("topology"), py::arg("devices"),
      py::arg("shards"), py::arg("checkpointing"), py::arg("memory_cap"), py::arg("optimizer"), py::arg("task"),
      py::arg("classes"), py::arg("device"), py::arg("tf32"), py::arg("bucket_mib"), py::arg("overlap"));
  s.def("device_names", [] { return sim::DeviceCatalog().names(); }, "Device models of the built-in catalog.");
}

}  // namespace tessera::python
