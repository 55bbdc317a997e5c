// Models (presets and JSON descriptions) and training: tessera.train runs the same loop as
// `tessera train` (tools/src/train_run.cpp) on the `local` backend, or as one rank of a job
// started by `tessera launch` (env://) on a multi-process backend such as ucx, and calls a Python
// function after every step with the loss, the step time and every rank's memory.
#include "common.hpp"
#include "tessera/comm/env_rendezvous.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/models.hpp"
#include "train_run.hpp"

namespace tessera::python {

namespace {

py::dict memory_dict(const core::MemStats& m) {
  py::dict d;
  for (int c = 0; c < core::kNumMemCategories; ++c)
    d[py::str(std::string(core::mem_category_name(static_cast<core::MemCategory>(c))))] = m.peak[c];
  d["total"] = m.peak_total;
  return d;
}

py::dict step_dict(const std::vector<nn::StepStats>& ranks) {
  const nn::StepStats& s = ranks.at(0);
  py::dict d;
  d["step"] = s.step;
  d["loss"] = s.loss;
  d["grad_norm"] = s.grad_norm;
  d["lr"] = s.lr;
  d["step_time_s"] = s.step_time_s;
  py::list times, mem;
  for (const nn::StepStats& r : ranks) {
    times.append(r.step_time_s);
    mem.append(memory_dict(r.memory));
  }
  d["step_time_s_per_rank"] = times;
  d["peak_memory_bytes"] = mem;
  return d;
}

}  // namespace

void bind_models(py::module_& m) {
  py::class_<nn::ModelSpec>(m, "ModelSpec",
                            "A model description (ConvNeXt or RegNet family): from model_preset(name) or "
                            "ModelSpec.from_json(text).")
      .def_static("from_json", [](const std::string& text) { return nn::model_from_json(text, "ModelSpec.from_json"); },
                  py::arg("text"))
      .def_readwrite("name", &nn::ModelSpec::name)
      .def_readonly("family", &nn::ModelSpec::family)
      .def_readonly("depths", &nn::ModelSpec::depths)
      .def_readonly("widths", &nn::ModelSpec::widths)
      .def_readonly("in_channels", &nn::ModelSpec::in_channels)
      .def_readonly("num_classes", &nn::ModelSpec::num_classes)
      .def_property_readonly("total_stride", &nn::ModelSpec::total_stride)
      .def("to_json", &nn::ModelSpec::to_json)
      .def("__repr__", [](const nn::ModelSpec& s) { return "ModelSpec(" + s.to_json() + ")"; });
  m.def("model_preset", &nn::model_preset, py::arg("name"));
  m.def("model_presets", &nn::model_preset_names, "The preset names model_preset accepts.");

  m.def(
      "_train",
      [](const py::object& model, const std::string& input, int batch, const std::string& mesh,
         const std::string& shard, int steps, const std::string& optimizer, double lr, double weight_decay,
         int warmup, double clip, unsigned long long seed, const std::string& task, int classes,
         const std::string& checkpointing, int threads, bool overlap, const std::string& trace,
         double timeout_s, const py::object& callback, const std::string& backend, const std::string& dtype) {
        tools::TrainArgs a;
        if (py::isinstance<py::str>(model)) a.model = model.cast<std::string>();
        a.input = input;
        a.batch = batch;
        a.mesh = mesh;
        a.shard = shard;
        a.steps = steps;
        a.optimizer = optimizer;
        a.lr = lr;
        a.weight_decay = weight_decay;
        a.warmup = warmup;
        a.clip = clip;
        a.seed = seed;
        a.task = task;
        a.classes = classes;
        a.checkpointing = checkpointing;
        a.threads = threads;
        a.no_overlap = !overlap;
        a.trace = trace;
        a.timeout_s = timeout_s;
        a.backend = backend;
        a.dtype = dtype;
        tools::TrainRunConfig cfg = tools::make_train_config(a);
        if (!py::isinstance<py::str>(model)) {
          // A ModelSpec: the same adjustments make_train_config applies to a preset.
          nn::ModelSpec spec = model.cast<nn::ModelSpec>();
          spec.task = cfg.train.model.task;
          spec.num_classes = classes;
          spec.in_channels = static_cast<int>(cfg.train.input[0]);
          spec.validate();
          nn::input_layout(cfg.mesh, cfg.train.shard, batch, cfg.train.input, spec.total_stride());
          cfg.train.model = spec;
        }
        py::list history;
        tools::TrainRunResult r;
        {
          py::gil_scoped_release nogil;
          r = tools::run_training(cfg, [&](const std::vector<nn::StepStats>& ranks) {
            py::gil_scoped_acquire gil;
            py::dict d = step_dict(ranks);
            history.append(d);
            if (!callback.is_none()) callback(d);
          });
        }
        py::dict out;
        out["steps"] = history;
        out["wall_s"] = r.wall_s;
        out["parameters"] = r.parameters;
        out["model"] = cfg.train.model.name;
        out["mesh"] = cfg.mesh.to_string();
        out["backend"] = cfg.backend;
        out["rank"] = cfg.backend == "local" ? 0 : comm::read_env().rank;
        out["summary"] = tools::training_summary(cfg, r);
        return out;
      },
      py::arg("model"), py::arg("input"), py::arg("batch"), py::arg("mesh"), py::arg("shard"), py::arg("steps"),
      py::arg("optimizer"), py::arg("lr"), py::arg("weight_decay"), py::arg("warmup"), py::arg("clip"),
      py::arg("seed"), py::arg("task"), py::arg("classes"), py::arg("checkpointing"), py::arg("threads"),
      py::arg("overlap"), py::arg("trace"), py::arg("timeout_s"), py::arg("callback"), py::arg("backend") = "local",
      py::arg("dtype") = "f32");
}

}  // namespace tessera::python
