// Runs one module forward and backward over in-process ranks with its input sharded by a
// layout, and gathers the output, the input gradient and the (all-reduced) parameter gradients
// into global float64 arrays — so a sharded run can be compared with the one-rank run and with
// float64 references. Shape-generic: outputs of any rank (N,C,H,W or N,C) are gathered.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "support/test_utils.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/nn/module.hpp"

namespace tessera::test {

/// Row-major index of `idx` in `shape`.
inline std::int64_t flat_index(const core::Shape& shape, const core::Shape& idx) {
  std::int64_t f = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

/// Calls fn(local index, global index) for every element of the box [off, off + shape).
inline void for_box(const core::Shape& shape, const core::Shape& off,
                    const std::function<void(std::int64_t, const core::Shape&)>& fn) {
  const std::int64_t n = core::shape_numel(shape);
  core::Shape idx(shape.size(), 0), g(shape.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t r = i;
    for (std::size_t d = shape.size(); d-- > 0;) {
      idx[d] = r % shape[d];
      r /= shape[d];
      g[d] = idx[d] + off[d];
    }
    fn(i, g);
  }
}

/// The box of a global row-major array as a tensor of `dtype`.
inline core::Tensor box_of(const std::vector<double>& global, const core::Shape& gshape, const core::Shape& off,
                           const core::Shape& shape, core::DType dtype = core::DType::F32) {
  std::vector<double> v(static_cast<std::size_t>(core::shape_numel(shape)));
  for_box(shape, off, [&](std::int64_t i, const core::Shape& g) { v[i] = global[flat_index(gshape, g)]; });
  return from_doubles(v, shape, dtype);
}

/// Writes a local tensor into its box of a global array.
inline void put_box(std::vector<double>& global, const core::Shape& gshape, const core::Shape& off,
                    const core::Tensor& t) {
  const auto v = to_doubles(t);
  for_box(t.shape(), off, [&](std::int64_t i, const core::Shape& g) { global[flat_index(gshape, g)] = v[i]; });
}

struct ModuleRun {
  core::Shape y_shape;
  std::vector<double> y, dx;
  std::vector<std::string> param_names;
  std::vector<std::vector<double>> grads;  ///< reduced parameter gradients, as rank 0 holds them
  bool grads_agree = true;                 ///< every rank holds the same reduced gradients
  std::vector<core::MemStats> memory;      ///< per rank
};

/// Builds a module with `make` on every rank of `in.mesh()`, sets it up for `in`, runs forward
/// on the rank's box of `x`, backward with its box of `dy` (global, in the output layout's shape;
/// when empty, all ones) and all-reduces each parameter gradient over its reduce dims.
inline ModuleRun run_module(const std::function<nn::ModulePtr()>& make, const core::Layout& in,
                            const std::vector<double>& x, std::vector<double> dy = {},
                            std::uint64_t seed = 7, std::int64_t step = 0,
                            core::DType dtype = core::DType::F32) {
  const int P = in.mesh().size();
  ModuleRun r;
  std::mutex mu;
  std::vector<std::vector<std::vector<double>>> grads(P);
  r.memory.resize(P);
  comm::local::run(P, [&](comm::Backend& world) {
    const int rank = world.rank();
    comm::MeshComm mesh(in.mesh(), world);
    auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(rank));
    compute::cpu::CpuBackend cpu(1);
    nn::ModulePtr m = make();
    nn::SetupContext sc;
    sc.rank = rank;
    sc.allocator = alloc;
    sc.seed = seed;
    sc.dtype = dtype;
    const core::Layout out = m->setup(in, sc);
    nn::Context ctx;
    ctx.mesh = &mesh;
    ctx.compute = &cpu;
    ctx.allocator = alloc;
    ctx.seed = seed;
    ctx.step = step;
    core::Tensor xl = box_of(x, in.global_shape(), in.local_offset(rank), in.local_shape(rank), dtype);
    core::Tensor y = m->forward(ctx, xl);
    const core::Shape ys = out.global_shape();
    {
      std::lock_guard<std::mutex> lock(mu);
      if (r.y.empty()) {
        r.y_shape = ys;
        r.y.assign(static_cast<std::size_t>(core::shape_numel(ys)), 0.0);
        r.dx.assign(x.size(), 0.0);
        if (dy.empty()) dy.assign(r.y.size(), 1.0);
      }
    }
    world.barrier();
    core::Tensor dyl = box_of(dy, ys, out.local_offset(rank), out.local_shape(rank), dtype);
    core::Tensor dx = m->backward(ctx, dyl);
    std::vector<nn::Parameter*> ps;
    m->parameters(ps);
    std::vector<std::vector<double>> g;
    for (nn::Parameter* p : ps) {
      if (!p->grad_reduce_mesh_dims.empty()) mesh.all_reduce(p->grad, p->grad_reduce_mesh_dims);
      g.push_back(to_doubles(p->grad));
    }
    std::lock_guard<std::mutex> lock(mu);
    put_box(r.y, ys, out.local_offset(rank), y);
    if (dx.defined()) put_box(r.dx, in.global_shape(), in.local_offset(rank), dx);
    grads[rank] = std::move(g);
    if (rank == 0)
      for (nn::Parameter* p : ps) r.param_names.push_back(p->name);
    r.memory[rank] = alloc->stats();
  });
  r.grads = grads[0];
  for (int q = 1; q < P; ++q)
    if (grads[q] != grads[0]) r.grads_agree = false;
  return r;
}

/// The float32 rule for one forward and backward (train_equivalence.hpp gives it for whole
/// training runs): y, dx and every gradient of `run` (float32, sharded) are within kFp32Factor
/// times as far from the float64 one-rank run `one64` as the float32 one-rank run `one32` is,
/// with a floor of 2 float32 roundoffs of the tensor's largest magnitude (where `one32` happens
/// to be exact). Replicated gradients must agree on every rank.
inline void require_fp32_same(const ModuleRun& run, const ModuleRun& one32, const ModuleRun& one64) {
  const auto check = [](const char* what, const std::vector<double>& a, const std::vector<double>& r32,
                        const std::vector<double>& r64) {
    double e = 0, scale = 0;
    for (std::size_t i = 0; i < r64.size() && i < r32.size(); ++i) {
      e = std::max(e, std::abs(r32[i] - r64[i]));
      scale = std::max(scale, std::abs(r64[i]));
    }
    const double allowed = kFp32Factor * std::max(e, 2 * std::ldexp(scale, -24));
    INFO(what << ": the float32 one-rank run is " << e << " from float64 (scale " << scale << "), allowed "
              << allowed);
    REQUIRE_WITHIN(a, r64, std::vector<double>(r64.size(), allowed));
  };
  REQUIRE(run.y_shape == one64.y_shape);
  check("output", run.y, one32.y, one64.y);
  check("input gradient", run.dx, one32.dx, one64.dx);
  REQUIRE(run.grads_agree);
  REQUIRE(run.grads.size() == one64.grads.size());
  for (std::size_t i = 0; i < run.grads.size(); ++i) {
    INFO("gradient of " << one64.param_names[i]);
    check("gradient", run.grads[i], one32.grads[i], one64.grads[i]);
  }
}

/// A one-rank layout of `shape` (the unsharded run).
inline core::Layout unsharded(const core::Shape& shape) {
  return core::Layout::replicated(core::DeviceMesh({1}, {"sp"}), shape);
}

}  // namespace tessera::test
