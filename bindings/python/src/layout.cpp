// DeviceMesh, placements (Shard, Replicate, Partial), Layout, ConvSpec and the halo plan of a
// sharded convolution as plain Python data. All shape and halo math is core's.
#include "common.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/conv_spec.hpp"
#include "tessera/nn/halo_plan.hpp"

namespace tessera::python {

namespace {

py::list box_to_py(const nn::Box& b) {
  py::list out;
  for (const core::Range& r : b.r) out.append(py::make_tuple(r.begin, r.end));
  return out;
}

py::dict plan_to_dict(const nn::HaloPlan& p) {
  py::dict d;
  d["rank"] = p.rank;
  d["input_shape"] = py::tuple(py::cast(p.in_shape));
  d["own"] = box_to_py(p.own);
  d["need"] = box_to_py(p.need);
  d["out"] = box_to_py(p.out_box);
  auto pieces = [](const std::vector<nn::HaloPiece>& v) {
    py::list l;
    for (const nn::HaloPiece& h : v) {
      py::dict e;
      e["peer"] = h.peer;
      e["box"] = box_to_py(h.box);
      e["elements"] = h.box.numel();
      l.append(e);
    }
    return l;
  };
  d["recvs"] = pieces(p.recvs);
  d["sends"] = pieces(p.sends);
  d["recv_elements"] = p.recv_elems();
  d["send_elements"] = p.send_elems();
  d["group"] = p.group;
  d["grad_reduce_mesh_dims"] = p.grad_reduce_mesh_dims;
  d["description"] = p.describe();
  return d;
}

std::pair<int, int> pair_of(const py::object& o, const char* what) {
  if (py::isinstance<py::int_>(o)) {
    const int v = o.cast<int>();
    return {v, v};
  }
  const auto v = o.cast<std::vector<int>>();
  TESSERA_CHECK(v.size() == 2, "ConvSpec: ", what, " must be an int or a pair (h, w); got ", v.size(), " values");
  return {v[0], v[1]};
}

}  // namespace

void bind_layout(py::module_& m) {
  py::class_<core::DeviceMesh>(m, "DeviceMesh",
                               "Ranks on an N-d grid with named dimensions: DeviceMesh(sp=4), "
                               "DeviceMesh(dp=2, sp=2), DeviceMesh('sp_h=2,sp_w=3').")
      .def(py::init([](const py::object& spec, const py::kwargs& dims) {
             if (!spec.is_none()) {
               TESSERA_CHECK(dims.empty(), "DeviceMesh: give a spec string or name=size keywords, not both");
               return core::DeviceMesh::parse(spec.cast<std::string>());
             }
             TESSERA_CHECK(!dims.empty(), "DeviceMesh: give the dimensions, e.g. DeviceMesh(sp=4) or DeviceMesh('dp=2,sp=2')");
             std::vector<int> shape;
             std::vector<std::string> names;
             for (auto item : dims) {
               names.push_back(item.first.cast<std::string>());
               shape.push_back(item.second.cast<int>());
             }
             return core::DeviceMesh(shape, names);
           }),
           py::arg("spec") = py::none())
      .def_static("from_shape",
                  [](std::vector<int> shape, std::vector<std::string> names) {
                    return core::DeviceMesh(std::move(shape), std::move(names));
                  },
                  py::arg("shape"), py::arg("names") = std::vector<std::string>{},
                  "A mesh from sizes and (optional) names.")
      .def_property_readonly("shape", [](const core::DeviceMesh& d) { return py::tuple(py::cast(d.shape())); })
      .def_property_readonly("names", [](const core::DeviceMesh& d) {
        py::list l;
        for (int i = 0; i < d.ndim(); ++i) l.append(d.dim_name(i));
        return py::tuple(l);
      })
      .def_property_readonly("ndim", &core::DeviceMesh::ndim)
      .def_property_readonly("size", &core::DeviceMesh::size, "Number of ranks.")
      .def_property_readonly("ranks", &core::DeviceMesh::ranks)
      .def("coords_of", &core::DeviceMesh::coords_of, py::arg("rank"))
      .def("rank_at", &core::DeviceMesh::rank_at, py::arg("coords"))
      .def("dim_index", [](const core::DeviceMesh& d, const std::string& n) { return d.dim_index(n); }, py::arg("name"))
      .def("__len__", &core::DeviceMesh::size)
      .def("__str__", &core::DeviceMesh::to_string)
      .def("__repr__", [](const core::DeviceMesh& d) { return "DeviceMesh('" + d.to_string() + "')"; })
      .def("__eq__", [](const core::DeviceMesh& a, const core::DeviceMesh& b) { return a == b; })
      .def("__hash__", [](const core::DeviceMesh& d) { return py::hash(py::str(d.to_string())); });

  py::class_<core::Placement>(m, "Placement",
                              "How a tensor relates to one mesh dimension: Shard(dim), Replicate() or Partial().")
      .def_property_readonly("kind", [](const core::Placement& p) -> std::string {
        return p.is_shard() ? "shard" : p.is_replicate() ? "replicate" : "partial";
      })
      .def_property_readonly("dim", [](const core::Placement& p) -> py::object {
        return p.is_shard() ? py::object(py::int_(p.dim())) : py::object(py::none());
      }, "The sharded tensor dimension (None unless Shard).")
      .def("__repr__", [](const core::Placement& p) -> std::string {
        return p.is_shard() ? "Shard(" + std::to_string(p.dim()) + ")" : p.is_replicate() ? "Replicate()" : "Partial()";
      })
      .def("__eq__", [](const core::Placement& a, const core::Placement& b) { return a == b; })
      .def("__hash__", [](const core::Placement& p) { return py::hash(py::make_tuple(int(p.kind()), p.dim())); });
  m.def("Shard", [](int dim) {
    TESSERA_CHECK(dim >= 0, "Shard(", dim, "): the tensor dimension must be non-negative (N,C,H,W = 0..3)");
    return core::Shard(dim);
  }, py::arg("dim"), "Split along tensor dimension `dim`, balanced (sizes differ by at most one unit).");
  m.def("Replicate", &core::Replicate, "Every rank of the mesh dimension holds the whole tensor.");
  m.def("Partial", &core::Partial, "Every rank holds a summand; the tensor is their sum.");

  py::class_<core::Layout>(m, "Layout", "A global shape plus one placement per mesh dimension.")
      .def(py::init([](const core::DeviceMesh& mesh, const py::object& shape, const py::object& placements,
                       const py::object& align) {
             return core::Layout(mesh, shape_from(shape), placements_from(placements),
                                 align.is_none() ? core::Shape{} : shape_from(align));
           }),
           py::arg("mesh"), py::arg("global_shape"), py::arg("placements"), py::arg("align") = py::none(),
           "placements: one Placement per mesh dimension (a single one for a 1-d mesh); align: the "
           "balanced split's unit per tensor dimension.")
      .def_static("replicated", [](const core::DeviceMesh& mesh, const py::object& shape) {
        return core::Layout::replicated(mesh, shape_from(shape));
      }, py::arg("mesh"), py::arg("global_shape"))
      .def_property_readonly("mesh", &core::Layout::mesh)
      .def_property_readonly("global_shape", [](const core::Layout& l) { return py::tuple(py::cast(l.global_shape())); })
      .def_property_readonly("placements", &core::Layout::placements)
      .def_property_readonly("align", [](const core::Layout& l) { return py::tuple(py::cast(l.align())); })
      .def("local_shape", [](const core::Layout& l, int rank) { return py::tuple(py::cast(l.local_shape(rank))); },
           py::arg("rank"), "Shape of `rank`'s local piece.")
      .def("local_offset", [](const core::Layout& l, int rank) { return py::tuple(py::cast(l.local_offset(rank))); },
           py::arg("rank"), "Global index of `rank`'s first local element.")
      .def("local_range", [](const core::Layout& l, int rank, int dim) {
        const core::Range r = l.local_range(rank, dim);
        return py::make_tuple(r.begin, r.end);
      }, py::arg("rank"), py::arg("dim"), "Half-open range [begin, end) of tensor dimension `dim` held by `rank`.")
      .def("local_slices", [](const core::Layout& l, int rank) {
        py::list s;
        const core::Shape off = l.local_offset(rank), sh = l.local_shape(rank);
        for (std::size_t d = 0; d < off.size(); ++d) s.append(py::slice(off[d], off[d] + sh[d], 1));
        return py::tuple(s);
      }, py::arg("rank"), "A tuple of slices selecting `rank`'s piece of the global array.")
      .def("__str__", &core::Layout::to_string)
      .def("__repr__", [](const core::Layout& l) { return "Layout(" + l.to_string() + ")"; })
      .def("__eq__", [](const core::Layout& a, const core::Layout& b) { return a == b; });

  py::class_<nn::ConvSpec>(m, "ConvSpec", "Hyper-parameters of a 2-D convolution over NCHW tensors.")
      .def(py::init([](std::int64_t cin, std::int64_t cout, const py::object& k, const py::object& s,
                       const py::object& p, const py::object& d, int groups, bool bias) {
             nn::ConvSpec c;
             c.in_channels = cin;
             c.out_channels = cout;
             std::tie(c.kernel_h, c.kernel_w) = pair_of(k, "kernel_size");
             std::tie(c.stride_h, c.stride_w) = pair_of(s, "stride");
             std::tie(c.pad_h, c.pad_w) = pair_of(p, "padding");
             std::tie(c.dilation_h, c.dilation_w) = pair_of(d, "dilation");
             c.groups = groups;
             c.bias = bias;
             c.validate();
             return c;
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true)
      .def_readonly("in_channels", &nn::ConvSpec::in_channels)
      .def_readonly("out_channels", &nn::ConvSpec::out_channels)
      .def_property_readonly("kernel_size", [](const nn::ConvSpec& c) { return py::make_tuple(c.kernel_h, c.kernel_w); })
      .def_property_readonly("stride", [](const nn::ConvSpec& c) { return py::make_tuple(c.stride_h, c.stride_w); })
      .def_property_readonly("padding", [](const nn::ConvSpec& c) { return py::make_tuple(c.pad_h, c.pad_w); })
      .def_property_readonly("dilation", [](const nn::ConvSpec& c) { return py::make_tuple(c.dilation_h, c.dilation_w); })
      .def_readonly("groups", &nn::ConvSpec::groups)
      .def_readonly("bias", &nn::ConvSpec::bias)
      .def_property_readonly("weight_shape", [](const nn::ConvSpec& c) { return py::tuple(py::cast(c.weight_shape())); })
      .def("output_shape", [](const nn::ConvSpec& c, const py::object& in) {
        return py::tuple(py::cast(c.output_shape(shape_from(in))));
      }, py::arg("input_shape"))
      .def("__repr__", [](const nn::ConvSpec& c) { return "ConvSpec(" + c.describe() + ")"; });

  m.def("conv_output_layout", &nn::conv_output_layout, py::arg("spec"), py::arg("input_layout"),
        "The natural output layout of a convolution over `input_layout` (core's rule).");
  m.def("halo_plan",
        [](const nn::ConvSpec& spec, const core::Layout& in, bool allow_wide) {
          const core::Layout out = nn::conv_output_layout(spec, in);
          nn::HaloOptions o;
          o.allow_wide = allow_wide;
          py::list plans;
          for (int r = 0; r < in.mesh().size(); ++r) plans.append(plan_to_dict(nn::make_halo_plan(spec, in, out, r, o)));
          return plans;
        },
        py::arg("spec"), py::arg("input_layout"), py::arg("allow_wide") = true,
        "The halo plan of every rank as plain data: a list (by rank) of dicts with boxes of global "
        "indices [(n0,n1),(c0,c1),(h0,h1),(w0,w1)] for 'own', 'need' and 'out', the 'recvs' and "
        "'sends' ({'peer','box','elements'}), element counts and core's description.");
}

}  // namespace tessera::python
