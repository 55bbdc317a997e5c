// Runs a sharded conv2d forward+backward over in-process ranks and gathers the results into
// global float64 arrays, so tests can compare them with the unsharded float64 reference.
#pragma once

#include <mutex>
#include <vector>

#include "nn/faulty_comm.hpp"
#include "support/reference/conv2d_ref.hpp"
#include "support/test_utils.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/nn/conv2d.hpp"

namespace tessera::test {

/// Global results of one sharded run.
struct ShardedResult {
  std::vector<double> y, dx, dw, db;
  bool weight_grads_agree = true;  ///< every rank holds the same reduced dw/db
};

/// A mesh plus the input placements to test.
struct MeshCase {
  core::DeviceMesh mesh;
  std::vector<core::Placement> placements;
  std::string name;
};

/// Copies the box [off, off+shape) of a global NCHW float64 array into a tensor of `dtype`.
inline core::Tensor slice_global(const std::vector<double>& g, const core::Shape& gshape,
                                 const core::Shape& off, const core::Shape& shape, core::DType dtype) {
  std::vector<double> v(static_cast<std::size_t>(core::shape_numel(shape)));
  std::size_t i = 0;
  for (std::int64_t n = 0; n < shape[0]; ++n)
    for (std::int64_t c = 0; c < shape[1]; ++c)
      for (std::int64_t h = 0; h < shape[2]; ++h)
        for (std::int64_t w = 0; w < shape[3]; ++w)
          v[i++] = g[(((n + off[0]) * gshape[1] + c + off[1]) * gshape[2] + h + off[2]) * gshape[3] + w + off[3]];
  return from_doubles(v, shape, dtype);
}

/// Writes a local tensor into its box of a global float64 array.
inline void place_global(std::vector<double>& g, const core::Shape& gshape, const core::Shape& off,
                         const core::Tensor& t) {
  const auto v = to_doubles(t);
  const auto& shape = t.shape();
  std::size_t i = 0;
  for (std::int64_t n = 0; n < shape[0]; ++n)
    for (std::int64_t c = 0; c < shape[1]; ++c)
      for (std::int64_t h = 0; h < shape[2]; ++h)
        for (std::int64_t w = 0; w < shape[3]; ++w)
          g[(((n + off[0]) * gshape[1] + c + off[1]) * gshape[2] + h + off[2]) * gshape[3] + w + off[3]] = v[i++];
}

/// Runs spec on x (global) sharded per `mc`, with output gradient dy (global), over
/// mc.mesh.size() local ranks; weight gradients are all-reduced over the input-sharding dims.
/// `fault` breaks the communication on purpose (faulty_comm.hpp), to show a check catches it.
inline ShardedResult run_sharded_conv(const nn::ConvSpec& spec, const core::Shape& xshape,
                                      const std::vector<double>& x, const std::vector<double>& w,
                                      const std::vector<double>& b, const std::vector<double>& dy,
                                      const MeshCase& mc, core::DType dtype, bool overlap = true,
                                      nn::HaloOptions halo = {}, Fault fault = Fault::None) {
  const core::Layout in(mc.mesh, xshape, mc.placements);
  const core::Layout out = nn::conv_output_layout(spec, in);
  const core::Shape yshape = out.global_shape();
  ShardedResult r;
  r.y.assign(static_cast<std::size_t>(core::shape_numel(yshape)), 0.0);
  r.dx.assign(x.size(), 0.0);
  std::vector<std::vector<double>> dws(mc.mesh.size()), dbs(mc.mesh.size());
  std::mutex mu;
  comm::local::run(mc.mesh.size(), [&](comm::Backend& local_world) {
    const int rank = local_world.rank();
    auto state = std::make_shared<FaultState>();
    state->fault = fault;
    FaultyComm world(local_world, state);
    comm::MeshComm meshc(mc.mesh, world);
    auto alloc = std::make_shared<core::Allocator>("rank" + std::to_string(rank));
    compute::cpu::CpuBackend cpu(1);
    nn::RankContext ctx{&world, &cpu, alloc};
    const nn::HaloPlan plan = nn::make_halo_plan(spec, in, out, rank, halo);
    core::Tensor xl = slice_global(x, xshape, in.local_offset(rank), in.local_shape(rank), dtype);
    core::Tensor wt = from_doubles(w, spec.weight_shape(), dtype);
    core::Tensor bt = spec.bias ? from_doubles(b, {spec.out_channels}, dtype) : core::Tensor();
    nn::Conv2dOptions opt;
    opt.overlap = overlap;
    nn::Conv2dSaved saved;
    core::Tensor y = nn::conv2d_forward(plan, ctx, xl, wt, &bt, &saved, opt);
    core::Tensor dyl = slice_global(dy, yshape, out.local_offset(rank), out.local_shape(rank), dtype);
    nn::Conv2dGrads g = nn::conv2d_backward(plan, ctx, saved, wt, dyl, true, spec.bias, opt);
    meshc.all_reduce(g.dw, plan.grad_reduce_mesh_dims);
    if (spec.bias) meshc.all_reduce(g.db, plan.grad_reduce_mesh_dims);
    std::lock_guard<std::mutex> lock(mu);
    // Replicated placements (none here besides the mesh dims that shard) would write twice with
    // identical values; each rank writes its own box.
    place_global(r.y, yshape, out.local_offset(rank), y);
    place_global(r.dx, xshape, in.local_offset(rank), g.dx);
    dws[rank] = to_doubles(g.dw);
    if (spec.bias) dbs[rank] = to_doubles(g.db);
  });
  r.dw = dws[0];
  r.db = dbs[0];
  for (int q = 1; q < mc.mesh.size(); ++q)
    if (dws[q] != dws[0] || dbs[q] != dbs[0]) r.weight_grads_agree = false;
  return r;
}

}  // namespace tessera::test
