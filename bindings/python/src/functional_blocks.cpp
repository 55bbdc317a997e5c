// tessera.functional (C++ side) for the blocks of core's models beyond the norm layers: Linear,
// LayerScale, DropPath, squeeze-and-excitation and nearest upsampling. Each is core's layer run
// through run_op (functional_run.hpp): sharded over in-process ranks, global arrays back.
#include "common.hpp"
#include "functional_run.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/layers.hpp"

namespace tessera::python {

namespace {

/// The shape of an array argument (`what` names it in the error when it is missing or not an array).
std::vector<std::int64_t> shape_of(const py::object& o, const std::string& op, const char* what) {
  const py::array a = py::array::ensure(o);
  TESSERA_CHECK(a, "tessera.functional.", op, ": ", what, " must be an array of numbers");
  return std::vector<std::int64_t>(a.shape(), a.shape() + a.ndim());
}

/// The channel count of an (N,C,H,W) input.
std::int64_t image_channels(const py::object& x, const std::string& op) {
  const auto s = shape_of(x, op, "input");
  TESSERA_CHECK(s.size() == 4, "tessera.functional.", op, ": the input must be (N,C,H,W); got ", s.size(),
                " dimension(s)");
  return s[1];
}

}  // namespace

void bind_functional_blocks(py::module_& m) {
  py::module_ f = m.attr("_functional").cast<py::module_>();
  f.def(
      "linear",
      [](const py::object& x, const py::object& w, const py::object& b, const py::object& mesh,
         const py::object& placement, const py::object& dy) {
        const auto ws = shape_of(w, "linear", "weight");
        TESSERA_CHECK(ws.size() == 2, "tessera.functional.linear: weight must be (out, in); got ", ws.size(),
                      " dimension(s)");
        const std::int64_t out = ws[0], in = ws[1];
        const bool bias = !b.is_none();
        return run_op("linear", [=] { return std::make_unique<nn::Linear>("linear", in, out, bias); }, x,
                      {{"weight", "weight", w}, {"bias", "bias", b}}, mesh, placement, dy, {});
      },
      py::arg("input"), py::arg("weight"), py::arg("bias"), py::arg("mesh"), py::arg("placement"),
      py::arg("grad_output"));
  f.def(
      "layer_scale",
      [](const py::object& x, const py::object& gamma, const py::object& mesh, const py::object& placement,
         const py::object& dy) {
        const std::int64_t c = image_channels(x, "layer_scale");
        return run_op("layer_scale", [c] { return std::make_unique<nn::LayerScale>("layer_scale", c); }, x,
                      {{"gamma", "gamma", gamma}}, mesh, placement, dy, {});
      },
      py::arg("input"), py::arg("gamma"), py::arg("mesh"), py::arg("placement"), py::arg("grad_output"));
  f.def(
      "drop_path",
      [](const py::object& x, double prob, std::uint64_t seed, std::int64_t step, const std::string& layer,
         const py::object& mesh, const py::object& placement, const py::object& dy) {
        TESSERA_CHECK(!layer.empty(), "tessera.functional.drop_path: layer must name the layer (its keep decision "
                      "hashes the name)");
        return run_op("drop_path", [=] { return std::make_unique<nn::DropPath>(layer, prob); }, x, {}, mesh,
                      placement, dy, RunOptions{seed, step});
      },
      py::arg("input"), py::arg("prob"), py::arg("seed"), py::arg("step"), py::arg("layer"), py::arg("mesh"),
      py::arg("placement"), py::arg("grad_output"));
  f.def(
      "drop_path_keep",
      [](std::uint64_t seed, std::int64_t step, const std::string& layer, std::int64_t sample, double prob) {
        return nn::DropPath::keep(seed, step, layer, sample, prob);
      },
      py::arg("seed"), py::arg("step"), py::arg("layer"), py::arg("sample"), py::arg("prob"));
  f.def(
      "squeeze_excite",
      [](const py::object& x, const py::object& w1, const py::object& b1, const py::object& w2,
         const py::object& b2, const py::object& mesh, const py::object& placement, const py::object& dy) {
        const std::int64_t c = image_channels(x, "squeeze_excite");
        const auto s1 = shape_of(w1, "squeeze_excite", "w1");
        TESSERA_CHECK(s1.size() == 2, "tessera.functional.squeeze_excite: w1 must be (squeeze, C); got ", s1.size(),
                      " dimension(s)");
        const std::int64_t squeeze = s1[0];
        return run_op("squeeze_excite", [=] { return std::make_unique<nn::SqueezeExcite>("se", c, squeeze); }, x,
                      {{"fc1.weight", "w1", w1}, {"fc1.bias", "b1", b1}, {"fc2.weight", "w2", w2},
                       {"fc2.bias", "b2", b2}},
                      mesh, placement, dy, {});
      },
      py::arg("input"), py::arg("w1"), py::arg("b1"), py::arg("w2"), py::arg("b2"), py::arg("mesh"),
      py::arg("placement"), py::arg("grad_output"));
  f.def(
      "upsample_nearest",
      [](const py::object& x, int factor, const py::object& mesh, const py::object& placement, const py::object& dy) {
        image_channels(x, "upsample_nearest");
        return run_op("upsample_nearest", [factor] { return std::make_unique<nn::UpsampleNearest>("upsample", factor); },
                      x, {}, mesh, placement, dy, {});
      },
      py::arg("input"), py::arg("factor"), py::arg("mesh"), py::arg("placement"), py::arg("grad_output"));
}

}  // namespace tessera::python
