// tessera::Error and its subclasses as Python exceptions that also derive from the matching
// built-in (InvalidArgument is a ValueError, Unsupported a NotImplementedError, NonFiniteError a
// FloatingPointError, ...), carrying the C++ message unchanged.
#include "common.hpp"
#include "tessera/core/error.hpp"

namespace tessera::python {

namespace {

// Created once per interpreter, stored on the module; the translator looks them up there.
PyObject* new_exception(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  const std::string qual = std::string("tessera.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qual.c_str(), doc, bases.ptr(), nullptr);
  if (!cls) throw py::error_already_set();
  m.add_object(name, py::handle(cls));
  return cls;
}

struct ErrorClasses {
  PyObject *error, *invalid, *unsupported, *backend, *timeout, *internal, *oom, *nonfinite;
};
ErrorClasses g_classes{};  // set once at import (the module is imported once per interpreter)

}  // namespace

void bind_errors(py::module_& m) {
  py::handle builtins = py::module_::import("builtins");
  auto b = [&](const char* n) { return builtins.attr(n); };
  ErrorClasses& c = g_classes;
  c.error = new_exception(m, "Error", py::make_tuple(b("Exception")),
                          "Base of every error tessera raises; the message says what, where and how to fix it.");
  py::handle err(c.error);
  c.invalid = new_exception(m, "InvalidArgument", py::make_tuple(err, b("ValueError")),
                            "The caller's fault: shapes, meshes, options, file contents.");
  c.unsupported = new_exception(m, "Unsupported", py::make_tuple(err, b("NotImplementedError")),
                                "A valid request that this backend or layer cannot carry out.");
  c.backend = new_exception(m, "BackendError", py::make_tuple(err, b("RuntimeError")),
                            "A failure reported by a communication or compute backend.");
  c.timeout = new_exception(m, "TimeoutError", py::make_tuple(py::handle(c.backend), b("TimeoutError")),
                            "A communication deadline expired (names the operation, rank and peer).");
  c.internal = new_exception(m, "InternalError", py::make_tuple(err, b("RuntimeError")),
                             "A broken invariant inside tessera: a bug to report.");
  c.oom = new_exception(m, "OutOfMemory", py::make_tuple(err, b("MemoryError")),
                        "Memory requested beyond an allocator's configured capacity.");
  c.nonfinite = new_exception(m, "NonFiniteError", py::make_tuple(err, b("FloatingPointError")),
                              "Training diverged: a step's loss or gradient is not finite. `step` is the "
                              "0-based step, `parameter` the first parameter (from the loss back) whose "
                              "gradient is not finite ('' when only the loss or the norm is).");
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    const ErrorClasses& k = g_classes;
    try {
      std::rethrow_exception(p);
    } catch (const TimeoutError& e) {
      PyErr_SetString(k.timeout, e.what());
    } catch (const BackendError& e) {
      PyErr_SetString(k.backend, e.what());
    } catch (const InvalidArgument& e) {
      PyErr_SetString(k.invalid, e.what());
    } catch (const Unsupported& e) {
      PyErr_SetString(k.unsupported, e.what());
    } catch (const InternalError& e) {
      PyErr_SetString(k.internal, e.what());
    } catch (const OutOfMemory& e) {
      PyErr_SetString(k.oom, e.what());
    } catch (const NonFiniteError& e) {
      // An instance carrying the step and the parameter as attributes, besides the message.
      PyObject* inst = PyObject_CallFunction(k.nonfinite, "s", e.what());
      if (!inst) return;  // the call set its own Python error
      PyObject* step = PyLong_FromLongLong(e.step());
      PyObject* param = PyUnicode_FromString(e.parameter().c_str());
      if (step && param && PyObject_SetAttrString(inst, "step", step) == 0 &&
          PyObject_SetAttrString(inst, "parameter", param) == 0)
        PyErr_SetObject(k.nonfinite, inst);
      Py_XDECREF(step);
      Py_XDECREF(param);
      Py_DECREF(inst);
    } catch (const Error& e) {
      PyErr_SetString(k.error, e.what());
    }
  });
  // For the error-mapping tests: raises the named C++ error with `message` from C++.
  m.def(
      "_raise_cpp_error",
      [](const std::string& kind, const std::string& message) {
        if (kind == "InvalidArgument") throw InvalidArgument(message);
        if (kind == "Unsupported") throw Unsupported(message);
        if (kind == "BackendError") throw BackendError("test", 1, message);
        if (kind == "TimeoutError") throw TimeoutError("test", message);
        if (kind == "InternalError") throw InternalError(message);
        if (kind == "OutOfMemory") throw OutOfMemory(message);
        if (kind == "Error") throw Error(message);
        throw InvalidArgument("_raise_cpp_error: unknown kind '" + kind + "'");
      },
      py::arg("kind"), py::arg("message"));
}

}  // namespace tessera::python
