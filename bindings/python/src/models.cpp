// Models (presets and JSON descriptions) and training: tessera.train runs run::train, the loop of
// `tessera train`, on the `local` backend, or as one rank of a job started by `tessera launch`
// (env://) on a multi-process backend such as ucx, and calls a Python function after every step
// with the step's record (run::step_record as a dict: docs/records.md, "Training step").
#include "tessera/nn/models.hpp"
#include "common.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"
#include "tessera/run/images.hpp"
#include "tessera/run/train.hpp"
#include "tessera/run/weights.hpp"

namespace tessera::python {

namespace {

py::object loads(const std::string& text) { return py::module_::import("json").attr("loads")(text); }

/// run::load_model_weights as tessera.load_weights' dict; the arrays own their memory.
py::dict weights_dict(const run::ModelWeights& w) {
  py::dict d;
  d["naming"] = w.report.naming;
  d["loaded"] = w.report.loaded;
  d["missing"] = w.report.missing;
  d["unexpected"] = w.report.unexpected;
  d["replaced"] = w.report.replaced;
  d["summary"] = w.report.summary();
  py::dict tensors;
  for (const auto& [name, t] : w.tensors)
    tensors[py::str(name)] = array_from_tensor(t).attr("copy")();
  d["tensors"] = tensors;
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
      [](const std::string& spec_json, const py::object& callback, const py::object& on_alarm) {
        const run::RunSpec spec = run::RunSpec::from_json(spec_json, run::RunSpec{}, "tessera.train");
        const run::TrainSetup setup = run::resolve_train(spec);
        run::TrainCallbacks callbacks;
        std::vector<data::DataStats> step_data;  // a run on an image folder: this step's
        callbacks.on_step_data = [&](const std::vector<data::DataStats>& d) { step_data = d; };
        callbacks.on_step = [&](const std::vector<nn::StepStats>& ranks,
                                const std::vector<run::Alarm>& alarms) {
          if (callback.is_none()) return;
          py::gil_scoped_acquire gil;
          callback(loads(run::step_record(setup.train.batch, ranks, alarms, step_data)));
        };
        callbacks.on_alarm = [&](const run::Alarm& a) {
          if (on_alarm.is_none()) return;
          py::gil_scoped_acquire gil;
          on_alarm(loads(run::alarm_json(a)));
        };
        // The run's notices, where `tessera train` shows them: the live metrics address on
        // sys.stdout, the first alarm of each kind on sys.stderr.
        callbacks.on_notice = [](core::ReportLevel level, const std::string& text) {
          py::gil_scoped_acquire gil;
          const char* stream = level == core::ReportLevel::Info ? "stdout" : "stderr";
          const py::object file = py::module_::import("sys").attr(stream);
          py::print(text, py::arg("file") = file, py::arg("flush") = true);
        };
        run::TrainResult r;
        {
          py::gil_scoped_release nogil;
          r = run::train(setup, callbacks);
        }
        return loads(run::train_json(setup, r));
      },
      py::arg("spec_json"), py::arg("callback"), py::arg("on_alarm") = py::none(),
      "Trains the run description `spec_json` (RunSpec JSON over the defaults of tessera train); returns "
      "run::train_json as a dict.");
  m.def(
      "_load_weights",
      [](const std::string& path, const std::string& model, int classes, const std::string& task) {
        run::ModelWeights w;
        {
          py::gil_scoped_release nogil;
          w = run::load_model_weights(path, model, task, classes);
        }
        return weights_dict(w);
      },
      py::arg("path"), py::arg("model"), py::arg("classes"), py::arg("task"),
      "run::load_model_weights as a dict (tessera.load_weights).");
  m.def(
      "_images_info",
      [](const std::string& folder) {
        std::string text;
        {
          py::gil_scoped_release nogil;
          text = run::summarize_images(folder).to_json();
        }
        return loads(text);
      },
      py::arg("folder"), "run::summarize_images as a dict (tessera.images_info).");
  m.def(
      "_add_restarts",
      [](const std::string& source, const std::string& target, int rows, int jobs) {
        run::AddRestartsOptions o;
        o.source = source, o.target = target, o.rows = rows, o.jobs = jobs;
        std::string text;
        {
          py::gil_scoped_release nogil;
          text = run::add_restarts(o).to_json();
        }
        return loads(text);
      },
      py::arg("source"), py::arg("target"), py::arg("rows"), py::arg("jobs"),
      "run::add_restarts as a dict (tessera.add_restarts).");
}

}  // namespace tessera::python
