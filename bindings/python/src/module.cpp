// The extension module tessera._tessera: each file binds one part (errors, tensors, layouts, the
// functional ops, models and training, the simulator). The Python package `tessera` re-exports it.
#include <cstdio>
#include <string>

#include "common.hpp"
#include "tessera/core/report.hpp"

namespace {

namespace py = pybind11;

// What the libraries report (notices, warnings) goes to sys.stderr, where Python's own warnings
// go and where a notebook shows them. A library thread may report, so the sink takes the GIL; at
// interpreter exit (atexit) the sink falls back to the process's stderr, since Python can no
// longer be called then.
void report_to_python(tessera::core::ReportLevel, std::string_view message) {
  const std::string line = std::string(message) + "\n";
  if (!Py_IsInitialized()) {
    std::fputs(line.c_str(), stderr);
    return;
  }
  py::gil_scoped_acquire gil;
  try {
    py::module_::import("sys").attr("stderr").attr("write")(line);
  } catch (const py::error_already_set&) {
    std::fputs(line.c_str(), stderr);  // no usable sys.stderr (None under pythonw)
  }
}

void report_to_stderr(tessera::core::ReportLevel, std::string_view message) {
  std::fprintf(stderr, "%s\n", std::string(message).c_str());
}

void install_report_sink() {
  tessera::core::set_report_sink(&report_to_python);
  py::module_::import("atexit").attr("register")(
      py::cpp_function([] { tessera::core::set_report_sink(&report_to_stderr); }));
}

}  // namespace

PYBIND11_MODULE(_tessera, m) {
  m.doc() = "tessera: spatial tensor parallelism for high-resolution CNNs (C++ core, pybind11)";
  using namespace tessera::python;
  install_report_sink();
  bind_errors(m);
  bind_tensor(m);
  bind_layout(m);
  bind_functional(m);
  bind_functional_modules(m);
  bind_functional_blocks(m);
  bind_models(m);
  bind_sim(m);
}
