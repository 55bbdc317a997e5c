// Shared helpers of the pybind11 module: NumPy <-> core::Tensor without copies where the layout
// allows, and the per-file binding entry points that module.cpp calls.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "tessera/core/layout.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::python {

namespace py = pybind11;

/// A C-contiguous float32 array: the argument itself when it already is one, else one copy
/// (py::array::forcecast converts other dtypes and layouts).
using F32Array = py::array_t<float, py::array::c_style | py::array::forcecast>;

/// A tensor viewing `a`'s memory (no copy); the tensor keeps the array alive. Supported dtypes:
/// float32, float64, int32, int64; strides must be whole, non-negative multiples of the item size.
core::Tensor tensor_from_array(const py::array& a);
/// An ndarray viewing `t`'s memory (no copy); the array keeps the tensor's storage alive.
py::array array_from_tensor(const core::Tensor& t);
/// The mesh placements from a Placement or a sequence of them.
std::vector<core::Placement> placements_from(const py::object& o);
/// A shape from any sequence of ints.
core::Shape shape_from(const py::object& o);

void bind_errors(py::module_& m);
void bind_tensor(py::module_& m);
void bind_layout(py::module_& m);
void bind_functional(py::module_& m);
/// The layers other than conv2d (functional_modules.cpp); after bind_functional.
void bind_functional_modules(py::module_& m);
/// Linear, LayerScale, DropPath, squeeze-and-excitation, upsampling (functional_blocks.cpp).
void bind_functional_blocks(py::module_& m);
void bind_models(py::module_& m);
void bind_sim(py::module_& m);

}  // namespace tessera::python
