// tessera.Tensor: a core::Tensor seen from Python, and zero-copy conversion to and from NumPy
// (buffer protocol both ways; a copy only when a dtype or layout cannot be viewed).
#include <sstream>

#include "common.hpp"
#include "tessera/core/error.hpp"

namespace tessera::python {

namespace {

core::DType dtype_of_array(const py::array& a) {
  const py::dtype dt = a.dtype();
  if (dt.is(py::dtype::of<float>())) return core::DType::F32;
  if (dt.is(py::dtype::of<double>())) return core::DType::F64;
  if (dt.is(py::dtype::of<std::int32_t>())) return core::DType::I32;
  if (dt.is(py::dtype::of<std::int64_t>())) return core::DType::I64;
  throw InvalidArgument("tessera.from_numpy: arrays of dtype " + dt.attr("name").cast<std::string>() +
                        " are not supported; convert with a.astype(numpy.float32) first");
}

py::dtype numpy_dtype(core::DType t) {
  switch (t) {
    case core::DType::F32: return py::dtype::of<float>();
    case core::DType::F64: return py::dtype::of<double>();
    case core::DType::I32: return py::dtype::of<std::int32_t>();
    case core::DType::I64: return py::dtype::of<std::int64_t>();
    default:
      throw Unsupported("tessera.Tensor.numpy: NumPy has no " + std::string(core::dtype_name(t)) +
                        " dtype; convert the tensor to f32 in C++ first");
  }
}

}  // namespace

core::Tensor tensor_from_array(const py::array& a) {
  const core::DType dt = dtype_of_array(a);
  const auto item = static_cast<py::ssize_t>(core::dtype_size(dt));
  core::Shape shape, strides;
  for (py::ssize_t d = 0; d < a.ndim(); ++d) {
    shape.push_back(a.shape(d));
    const py::ssize_t s = a.strides(d);
    TESSERA_CHECK(s >= 0 && s % item == 0, "tessera.from_numpy: dimension ", d, " has stride ", s,
                  " bytes, which is negative or not a multiple of the item size ", item,
                  "; pass numpy.ascontiguousarray(a)");
    strides.push_back(s / item);
  }
  // The array stays alive as long as the storage; dropping the reference needs the GIL, which
  // the thread that frees the last tensor may not hold.
  auto* keep = new py::object(py::reinterpret_borrow<py::object>(a));
  std::shared_ptr<void> keepalive(keep, [](void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
  return core::Tensor::from_blob(const_cast<void*>(a.data()), shape, dt, std::move(keepalive), strides);
}

py::array array_from_tensor(const core::Tensor& t) {
  TESSERA_CHECK(t.defined() && !t.is_meta(), "tessera.Tensor.numpy: the tensor ",
                t.defined() ? t.describe() : std::string("(undefined)"), " holds no data");
  const auto item = static_cast<py::ssize_t>(core::dtype_size(t.dtype()));
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides;
  for (std::int64_t s : t.strides()) strides.push_back(static_cast<py::ssize_t>(s) * item);
  auto* owner = new core::Tensor(t);
  py::capsule base(owner, [](void* p) { delete static_cast<core::Tensor*>(p); });
  return py::array(numpy_dtype(t.dtype()), shape, strides, t.raw_data(), base);
}

std::vector<core::Placement> placements_from(const py::object& o) {
  if (py::isinstance<core::Placement>(o)) return {o.cast<core::Placement>()};
  std::vector<core::Placement> out;
  for (py::handle h : o) out.push_back(h.cast<core::Placement>());
  return out;
}

core::Shape shape_from(const py::object& o) {
  core::Shape s;
  for (py::handle h : o) s.push_back(h.cast<std::int64_t>());
  return s;
}

void bind_tensor(py::module_& m) {
  py::class_<core::Tensor>(m, "Tensor", py::buffer_protocol(),
                           "A dense strided host tensor of tessera's core. numpy.asarray(t) and "
                           "t.numpy() view its memory without copying.")
      .def_buffer([](core::Tensor& t) -> py::buffer_info {
        const py::dtype dt = numpy_dtype(t.dtype());
        TESSERA_CHECK(t.defined() && !t.is_meta(), "tessera.Tensor: the tensor holds no data");
        const auto item = static_cast<py::ssize_t>(core::dtype_size(t.dtype()));
        std::vector<py::ssize_t> strides;
        for (std::int64_t s : t.strides()) strides.push_back(static_cast<py::ssize_t>(s) * item);
        return py::buffer_info(t.raw_data(), item, std::string(1, dt.char_()), t.ndim(),
                               std::vector<py::ssize_t>(t.shape().begin(), t.shape().end()), strides);
      })
      .def_property_readonly("shape", [](const core::Tensor& t) { return py::tuple(py::cast(t.shape())); },
                             "The shape, as a tuple.")
      .def_property_readonly("strides", [](const core::Tensor& t) { return py::tuple(py::cast(t.strides())); },
                             "Strides in elements (not bytes), as a tuple.")
      .def_property_readonly("dtype", [](const core::Tensor& t) { return std::string(core::dtype_name(t.dtype())); },
                             "Element type: 'f32', 'f64', ...")
      .def_property_readonly("ndim", &core::Tensor::ndim)
      .def_property_readonly("nbytes", &core::Tensor::nbytes)
      .def("is_contiguous", &core::Tensor::is_contiguous)
      .def("numpy", &array_from_tensor, "An ndarray viewing this tensor's memory (no copy).")
      .def("shares_memory_with", [](const core::Tensor& t, const py::array& a) {
             return t.raw_data() == a.data();
           }, py::arg("array"), "True when the tensor's first element is the array's (a zero-copy view).")
      .def("__repr__", [](const core::Tensor& t) {
        return "tessera.Tensor(" + (t.defined() ? t.describe() : std::string("undefined")) + ")";
      });
  m.def("from_numpy", &tensor_from_array, py::arg("array"),
        "A tessera.Tensor viewing the array's memory (no copy; the tensor keeps the array alive). "
        "float32, float64, int32 and int64; non-negative strides.");
}

}  // namespace tessera::python
