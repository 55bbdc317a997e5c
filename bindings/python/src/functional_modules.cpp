// tessera.functional (C++ side) for core's layers other than conv2d: LayerNorm, BatchNorm (SyncBN
// when sharded), the activations and global average pooling. Each call builds the layer on every
// in-process rank, sets it up for the input layout, copies the caller's parameters in, runs
// forward and backward on the rank's piece, all-reduces the parameter gradients as the trainer
// does, and gathers the output and input gradient (core's redistribute). The same runner
// (functional_run.hpp) serves the blocks in functional_blocks.cpp.
#include "functional_run.hpp"

#include <functional>
#include <map>
#include <mutex>

#include "common.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/comm/redistribute.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/layers.hpp"
#include "tessera/run/devices.hpp"

namespace tessera::python {

namespace {

using core::Tensor;

struct RunResult {
  Tensor y, dx;
  std::map<std::string, Tensor> grads;  ///< by name relative to the module ("weight", "fc1.bias"), all-reduced
};

/// "layer_norm.weight" -> "weight" for the module "layer_norm".
std::string relative_name(const std::string& module, const std::string& name) {
  const std::string prefix = module + ".";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

RunResult run_module(const std::function<nn::ModulePtr()>& make, const core::Layout& in, const Tensor& x,
                     const std::map<std::string, Tensor>& params, const Tensor* dy, const std::string& op,
                     const RunOptions& opt) {
  const core::DeviceMesh& mesh = in.mesh();
  const core::Layout in_r = core::Layout::replicated(mesh, in.global_shape());
  RunResult res;
  std::mutex mu;
  run::local_ranks(mesh.size(), [&](comm::Backend& world) {
    comm::MeshComm mc(mesh, world);
    const int r = world.rank();
    auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(r));
    const auto cpu = run::make_compute(run::Device{}, 1);
    nn::ModulePtr m = make();
    nn::SetupContext sc;
    sc.rank = r;
    sc.allocator = alloc;
    const core::Layout out = m->setup(in, sc);
    std::vector<nn::Parameter*> ps;
    m->parameters(ps);
    for (nn::Parameter* p : ps) {
      const std::string rel = relative_name(m->name(), p->name);
      const auto it = params.find(rel);
      if (it == params.end()) continue;
      TESSERA_CHECK(it->second.shape() == p->value.shape(), "tessera.functional.", op, ": ", rel, " has shape ",
                    core::shape_str(it->second.shape()), " but the layer's ", rel, " has shape ",
                    core::shape_str(p->value.shape()));
      p->value.copy_from(it->second);
    }
    nn::Context ctx;
    ctx.seed = opt.seed;
    ctx.step = opt.step;
    ctx.mesh = &mc;
    ctx.compute = cpu.get();
    ctx.allocator = alloc;
    const core::Layout out_r = core::Layout::replicated(mesh, out.global_shape());
    const Tensor xl = comm::redistribute(mc, x, in_r, in);
    const Tensor y = m->forward(ctx, xl);
    const Tensor yg = comm::redistribute(mc, y, out, out_r);
    Tensor dxg;
    std::map<std::string, Tensor> grads;
    if (dy) {
      TESSERA_CHECK(dy->shape() == out.global_shape(), "tessera.functional.", op, ": grad_output has shape ",
                    core::shape_str(dy->shape()), " but the output has shape ", core::shape_str(out.global_shape()));
      const Tensor dyl = comm::redistribute(mc, *dy, out_r, out);
      const Tensor dx = m->backward(ctx, dyl);
      if (dx.defined()) dxg = comm::redistribute(mc, dx, in, in_r);
      for (nn::Parameter* p : ps) {
        if (!p->grad_reduce_mesh_dims.empty()) mc.all_reduce(p->grad, p->grad_reduce_mesh_dims);
        grads[relative_name(m->name(), p->name)] = p->grad;
      }
    }
    if (r == 0) {
      std::lock_guard<std::mutex> lock(mu);
      res.y = yg;
      res.dx = dxg;
      res.grads = std::move(grads);
    }
  });
  return res;
}

core::Layout layout_for(const core::Shape& xs, const py::object& mesh_o, const py::object& placement_o,
                        const std::string& op) {
  const core::DeviceMesh mesh = mesh_o.is_none() ? core::DeviceMesh() : mesh_o.cast<core::DeviceMesh>();
  if (placement_o.is_none()) {
    TESSERA_CHECK(mesh.size() == 1, "tessera.functional.", op, ": mesh ", mesh.to_string(),
                  " has several ranks; give placement=tessera.Shard(3) (W), Shard(2) (H) or Shard(0) (batch)");
    return core::Layout(mesh, xs, std::vector<core::Placement>(mesh.ndim(), core::Replicate()));
  }
  return core::Layout(mesh, xs, placements_from(placement_o));
}

Tensor f32(const py::object& o, F32Array& keep) {
  keep = F32Array::ensure(o);
  TESSERA_CHECK(keep, "tessera.functional: expected an array of numbers");
  return tensor_from_array(keep);
}

}  // namespace

py::dict run_op(const std::string& op, const std::function<nn::ModulePtr()>& make, const py::object& x_in,
                const std::vector<ParamIn>& param_in, const py::object& mesh_o, const py::object& placement_o,
                const py::object& dy_in, const RunOptions& opt) {
  F32Array xa, dya;
  std::vector<F32Array> keep(param_in.size());
  const Tensor x = f32(x_in, xa);
  std::map<std::string, Tensor> params;
  for (std::size_t i = 0; i < param_in.size(); ++i)
    if (!param_in[i].value.is_none()) params[param_in[i].name] = f32(param_in[i].value, keep[i]);
  Tensor dy;
  if (!dy_in.is_none()) dy = f32(dy_in, dya);
  const core::Layout in = layout_for(x.shape(), mesh_o, placement_o, op);
  RunResult r;
  {
    py::gil_scoped_release nogil;
    r = run_module(make, in, x, params, dy.defined() ? &dy : nullptr, op, opt);
  }
  py::dict d;
  d["output"] = array_from_tensor(r.y);
  d["grad_input"] = r.dx.defined() ? py::object(array_from_tensor(r.dx)) : py::none();
  for (const ParamIn& p : param_in) {
    const auto it = r.grads.find(p.name);
    d[py::str("grad_" + p.key)] = it != r.grads.end() ? py::object(array_from_tensor(it->second)) : py::none();
  }
  return d;
}

namespace {

/// The norm layers' and the activations' call: parameters "weight" and "bias" (grad_weight and
/// grad_bias are None for a layer without them).
py::dict call(const std::string& op, const std::function<nn::ModulePtr()>& make, const py::object& x_in,
              const std::map<std::string, py::object>& param_in, const py::object& mesh_o,
              const py::object& placement_o, const py::object& dy_in) {
  std::vector<ParamIn> ps;
  for (const char* leaf : {"weight", "bias"}) {
    const auto it = param_in.find(leaf);
    ps.push_back({leaf, leaf, it != param_in.end() ? it->second : py::none()});
  }
  return run_op(op, make, x_in, ps, mesh_o, placement_o, dy_in, {});
}

std::int64_t channels_of(const py::object& x) {
  const py::array a = py::array::ensure(x);
  TESSERA_CHECK(a && a.ndim() >= 2, "tessera.functional: the input must be (N,C,H,W)");
  return a.shape(1);
}

}  // namespace

void bind_functional_modules(py::module_& m) {
  py::module_ f = m.attr("_functional").cast<py::module_>();
  f.def(
      "layer_norm",
      [](const py::object& x, const py::object& w, const py::object& b, double eps, const py::object& mesh,
         const py::object& placement, const py::object& dy) {
        const std::int64_t c = channels_of(x);
        return call("layer_norm", [c, eps] { return std::make_unique<nn::LayerNorm>("layer_norm", c, eps); }, x,
                    {{"weight", w}, {"bias", b}}, mesh, placement, dy);
      },
      py::arg("input"), py::arg("weight"), py::arg("bias"), py::arg("eps"), py::arg("mesh"), py::arg("placement"),
      py::arg("grad_output"));
  f.def(
      "batch_norm",
      [](const py::object& x, const py::object& w, const py::object& b, double eps, const py::object& mesh,
         const py::object& placement, const py::object& dy) {
        const std::int64_t c = channels_of(x);
        return call("batch_norm", [c, eps] { return std::make_unique<nn::BatchNorm>("batch_norm", c, eps); }, x,
                    {{"weight", w}, {"bias", b}}, mesh, placement, dy);
      },
      py::arg("input"), py::arg("weight"), py::arg("bias"), py::arg("eps"), py::arg("mesh"), py::arg("placement"),
      py::arg("grad_output"));
  f.def(
      "activation",
      [](const py::object& x, const std::string& kind, const py::object& mesh, const py::object& placement,
         const py::object& dy) {
        compute::Activation a;
        if (kind == "relu") a = compute::Activation::Relu;
        else if (kind == "gelu") a = compute::Activation::Gelu;
        else if (kind == "sigmoid") a = compute::Activation::Sigmoid;
        else throw InvalidArgument("tessera.functional.activation: unknown kind '" + kind + "'; use relu, gelu or sigmoid");
        return call(kind, [a, kind] { return std::make_unique<nn::ActivationLayer>(kind, a); }, x, {}, mesh,
                    placement, dy);
      },
      py::arg("input"), py::arg("kind"), py::arg("mesh"), py::arg("placement"), py::arg("grad_output"));
  f.def(
      "global_avg_pool",
      [](const py::object& x, const py::object& mesh, const py::object& placement, const py::object& dy) {
        return call("global_avg_pool", [] { return std::make_unique<nn::GlobalAvgPool>("global_avg_pool"); }, x, {},
                    mesh, placement, dy);
      },
      py::arg("input"), py::arg("mesh"), py::arg("placement"), py::arg("grad_output"));
}

}  // namespace tessera::python
