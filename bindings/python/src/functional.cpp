// tessera.functional (C++ side): runs core's sharded ops over N in-process ranks (the `local`
// comm backend) and returns global NumPy arrays, plus distribute/gather through core's
// redistribute. The GIL is released while the ranks run.
#include <mutex>

#include "common.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/comm/redistribute.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/conv2d.hpp"
#include "tessera/nn/halo_plan.hpp"
#include "tessera/run/devices.hpp"

namespace tessera::python {

namespace {

using core::Tensor;

std::pair<int, int> hw_pair(const py::object& o, const char* what) {
  if (py::isinstance<py::int_>(o)) return {o.cast<int>(), o.cast<int>()};
  const auto v = o.cast<std::vector<int>>();
  TESSERA_CHECK(v.size() == 2, "tessera.functional.conv2d: ", what, " must be an int or a pair (h, w); got ",
                v.size(), " values");
  return {v[0], v[1]};
}

void check_4d(const py::array& a, const char* what) {
  TESSERA_CHECK(a.ndim() == 4, "tessera.functional.conv2d: ", what, " must be 4-d (N,C,H,W); got ", a.ndim(),
                " dimensions");
}

struct ConvResult {
  Tensor y, dx, dw, db;
  std::int64_t halo_elements = 0;
};

// Every rank: slice its input piece from the replicated global x (Replicate -> Shard: a local
// slice), build its halo plan, run the sharded forward (and backward), all-reduce the Partial
// weight gradients, gather the output and the input gradient back to Replicate.
// `device`: "cpu" or "cuda" / "cuda:N" (every rank on that GPU; the arrays are copied there and
// the results back).
ConvResult run_conv(const nn::ConvSpec& spec, const core::Layout& in, const Tensor& x, const Tensor& w,
                    const Tensor* b, const Tensor* dy, bool overlap, int threads, const std::string& device) {
  const std::optional<run::Device> dev = run::try_parse_device(device);
  TESSERA_CHECK(dev.has_value(), "tessera.functional.conv2d: device='", device,
                "': expected 'cpu', 'cuda' or 'cuda:N'");
  const core::DeviceMesh& mesh = in.mesh();
  const core::Layout out = nn::conv_output_layout(spec, in);
  const core::Layout in_r = core::Layout::replicated(mesh, in.global_shape());
  const core::Layout out_r = core::Layout::replicated(mesh, out.global_shape());
  // Plans are built (and validated) before any rank starts: a bad configuration fails here.
  for (int r = 0; r < mesh.size(); ++r) nn::make_halo_plan(spec, in, out, r);
  if (dy)
    TESSERA_CHECK(dy->shape() == out.global_shape(), "tessera.functional.conv2d: grad_output has shape ",
                  core::shape_str(dy->shape()), " but the output has shape ", core::shape_str(out.global_shape()));
  ConvResult res;
  std::mutex mu;
  run::local_ranks(mesh.size(), [&](comm::Backend& world) {
    comm::MeshComm mc(mesh, world);
    const int r = world.rank();
    const auto cb = run::make_compute(*dev, threads);
    const auto memory = cb->device_memory();
    auto alloc = memory ? std::make_shared<core::Allocator>("rank " + std::to_string(r), memory)
                        : std::make_shared<core::Allocator>("rank " + std::to_string(r));
    // The global arrays, in this rank's memory (themselves on the host).
    auto here = [&](const Tensor& t) { return memory ? t.to(alloc, core::MemCategory::Activation) : t; };
    const Tensor xr = here(x), wr = here(w), br = b ? here(*b) : Tensor(), dyr = dy ? here(*dy) : Tensor();
    nn::RankContext ctx{&world, cb.get(), alloc};
    nn::Conv2dOptions opt;
    opt.overlap = overlap;
    const nn::HaloPlan plan = nn::make_halo_plan(spec, in, out, r);
    const Tensor xl = comm::redistribute(mc, xr, in_r, in);
    nn::Conv2dSaved saved;
    const Tensor y = nn::conv2d_forward(plan, ctx, xl, wr, b ? &br : nullptr, dy ? &saved : nullptr, opt);
    const Tensor yg = comm::redistribute(mc, y, out, out_r);
    nn::Conv2dGrads g;
    Tensor dxg;
    if (dy) {
      const Tensor dyl = comm::redistribute(mc, dyr, out_r, out);
      g = nn::conv2d_backward(plan, ctx, saved, wr, dyl, true, b != nullptr, opt);
      mc.all_reduce(g.dw, plan.grad_reduce_mesh_dims);
      if (b) mc.all_reduce(g.db, plan.grad_reduce_mesh_dims);
      dxg = comm::redistribute(mc, g.dx, in, in_r);
    }
    auto host = [](const Tensor& t) { return t.defined() ? t.to_host() : t; };
    const Tensor yh = host(yg), dxh = host(dxg), dwh = host(g.dw), dbh = host(g.db);
    std::lock_guard<std::mutex> lock(mu);
    res.halo_elements += plan.recv_elems();
    if (r == 0) {
      res.y = yh;
      res.dx = dxh;
      res.dw = dwh;
      res.db = dbh;
    }
  });
  return res;
}

py::object maybe_array(const Tensor& t) { return t.defined() ? py::object(array_from_tensor(t)) : py::none(); }

core::Layout input_layout_for(const core::Shape& xs, const py::object& mesh_o, const py::object& placement_o) {
  const core::DeviceMesh mesh = mesh_o.is_none() ? core::DeviceMesh() : mesh_o.cast<core::DeviceMesh>();
  std::vector<core::Placement> pl;
  if (placement_o.is_none()) {
    pl.assign(mesh.ndim(), core::Replicate());
    TESSERA_CHECK(mesh.size() == 1, "tessera.functional: mesh ", mesh.to_string(),
                  " has several ranks; give placement=tessera.Shard(3) (W), Shard(2) (H) or Shard(0) (batch)");
  } else {
    pl = placements_from(placement_o);
  }
  return core::Layout(mesh, xs, pl);
}

}  // namespace

void bind_functional(py::module_& m) {
  py::module_ f = m.def_submodule("_functional", "C++ side of tessera.functional");
  f.def(
      "conv2d",
      [](const py::array& x_in, const py::array& w_in, const py::object& b_in, const py::object& stride,
         const py::object& padding, const py::object& dilation, int groups, const py::object& mesh_o,
         const py::object& placement_o, const py::object& dy_in, bool overlap, int threads,
         const std::string& device) {
        check_4d(x_in, "input");
        check_4d(w_in, "weight");
        // float32 C-contiguous arrays are viewed; anything else is converted once.
        const F32Array x = F32Array::ensure(x_in), w = F32Array::ensure(w_in);
        const Tensor xt = tensor_from_array(x), wt = tensor_from_array(w);
        nn::ConvSpec spec;
        spec.in_channels = xt.size(1);
        spec.out_channels = wt.size(0);
        spec.kernel_h = static_cast<int>(wt.size(2));
        spec.kernel_w = static_cast<int>(wt.size(3));
        std::tie(spec.stride_h, spec.stride_w) = hw_pair(stride, "stride");
        std::tie(spec.pad_h, spec.pad_w) = hw_pair(padding, "padding");
        std::tie(spec.dilation_h, spec.dilation_w) = hw_pair(dilation, "dilation");
        spec.groups = groups;
        spec.bias = !b_in.is_none();
        spec.validate();
        TESSERA_CHECK(wt.shape() == spec.weight_shape(), "tessera.functional.conv2d: weight has shape ",
                      core::shape_str(wt.shape()), " but ", spec.describe(), " over an input with ",
                      spec.in_channels, " channels needs ", core::shape_str(spec.weight_shape()),
                      " (out_channels, in_channels/groups, kh, kw)");
        spec.output_shape(xt.shape());  // throws when the kernel does not fit
        Tensor bt, dyt;
        F32Array b, dy;
        if (!b_in.is_none()) {
          b = F32Array::ensure(b_in);
          TESSERA_CHECK(b && b.ndim() == 1 && b.shape(0) == spec.out_channels,
                        "tessera.functional.conv2d: bias must be 1-d with ", spec.out_channels, " entries");
          bt = tensor_from_array(b);
        }
        if (!dy_in.is_none()) {
          dy = F32Array::ensure(dy_in);
          TESSERA_CHECK(dy && dy.ndim() == 4, "tessera.functional.conv2d: grad_output must be 4-d (N,C,H,W)");
          dyt = tensor_from_array(dy);
        }
        const core::Layout in = input_layout_for(xt.shape(), mesh_o, placement_o);
        TESSERA_CHECK(threads >= 1, "tessera.functional.conv2d: threads=", threads, " must be at least 1");
        ConvResult r;
        {
          py::gil_scoped_release nogil;
          r = run_conv(spec, in, xt, wt, bt.defined() ? &bt : nullptr, dyt.defined() ? &dyt : nullptr, overlap,
                       threads, device);
        }
        py::dict d;
        d["output"] = maybe_array(r.y);
        d["grad_input"] = maybe_array(r.dx);
        d["grad_weight"] = maybe_array(r.dw);
        d["grad_bias"] = maybe_array(r.db);
        d["halo_elements"] = r.halo_elements;
        return d;
      },
      py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1,
      py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("mesh") = py::none(),
      py::arg("placement") = py::none(), py::arg("grad_output") = py::none(), py::arg("overlap") = true,
      py::arg("threads") = 1, py::arg("device") = "cpu");

  f.def(
      "distribute",
      [](const py::array& a, const core::Layout& to) {
        const Tensor t = tensor_from_array(a);
        TESSERA_CHECK(t.shape() == to.global_shape(), "tessera.distribute: array has shape ", core::shape_str(t.shape()),
                      " but the layout's global shape is ", core::shape_str(to.global_shape()));
        const core::Layout from = core::Layout::replicated(to.mesh(), to.global_shape());
        std::vector<Tensor> pieces(to.mesh().size());
        {
          py::gil_scoped_release nogil;
          run::local_ranks(to.mesh().size(), [&](comm::Backend& world) {
            comm::MeshComm mc(to.mesh(), world);
            pieces[world.rank()] = comm::redistribute(mc, t, from, to);
          });
        }
        py::list out;
        for (const Tensor& p : pieces) out.append(array_from_tensor(p));
        return out;
      },
      py::arg("array"), py::arg("layout"));
  f.def(
      "gather",
      [](const py::list& pieces_in, const core::Layout& from) {
        const int P = from.mesh().size();
        TESSERA_CHECK(static_cast<int>(pieces_in.size()) == P, "tessera.gather: got ", pieces_in.size(),
                      " pieces for a mesh of ", P, " ranks (", from.mesh().to_string(), ")");
        std::vector<Tensor> pieces;
        for (py::handle h : pieces_in) pieces.push_back(tensor_from_array(py::reinterpret_borrow<py::array>(h)));
        for (int r = 0; r < P; ++r)
          TESSERA_CHECK(pieces[r].shape() == from.local_shape(r), "tessera.gather: piece ", r, " has shape ",
                        core::shape_str(pieces[r].shape()), " but the layout gives rank ", r, " the shape ",
                        core::shape_str(from.local_shape(r)));
        const core::Layout to = core::Layout::replicated(from.mesh(), from.global_shape());
        Tensor full;
        {
          py::gil_scoped_release nogil;
          run::local_ranks(P, [&](comm::Backend& world) {
            comm::MeshComm mc(from.mesh(), world);
            Tensor g = comm::redistribute(mc, pieces[world.rank()], from, to);
            if (world.rank() == 0) full = g;
          });
        }
        return array_from_tensor(full);
      },
      py::arg("pieces"), py::arg("layout"));
}

}  // namespace tessera::python
