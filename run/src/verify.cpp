// verify_conv: the sharded convolution (halo exchange, partial weight gradients all-reduced)
// against the same op on one rank, over the local comm backend and the cpu compute backend.
#include "tessera/run/verify.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>

#include "tessera/comm/mesh_comm.hpp"
#include "tessera/comm/redistribute.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/conv2d.hpp"
#include "tessera/run/devices.hpp"
#include "tessera/run/halo.hpp"

namespace tessera::run {
namespace {

using core::Tensor;

Tensor random(const core::Shape& s, std::mt19937& gen) {
  Tensor t = Tensor::empty(s, core::DType::F32, core::MemCategory::Workspace);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = d(gen);
  return t;
}

double rel_diff(const Tensor& a, const Tensor& b) {
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  const float* pa = ac.data<float>();
  const float* pb = bc.data<float>();
  double num = 0, den = 0;
  for (std::int64_t i = 0; i < ac.numel(); ++i) {
    num = std::max(num, static_cast<double>(std::abs(pa[i] - pb[i])));
    den = std::max(den, static_cast<double>(std::abs(pb[i])));
  }
  return den > 0 ? num / den : num;
}

/// The op's inputs and the output gradient, global.
struct ConvData {
  Tensor x, w, b, dy;
};

/// The output, input gradient and (all-reduced) weight and bias gradients, global.
struct ConvOut {
  Tensor y, dx, dw, db;
};

ConvOut unsharded(const nn::ConvSpec& spec, const ConvData& d) {
  auto cpu = make_compute(Device{});
  const core::DeviceMesh one({1}, {"sp"});
  const core::Layout in1(one, d.x.shape(), {core::Shard(3)}),
      out1 = nn::conv_output_layout(spec, in1);
  const nn::HaloPlan plan1 = nn::make_halo_plan(spec, in1, out1, 0);
  nn::RankContext ctx1{nullptr, cpu.get(), nullptr};
  nn::Conv2dSaved saved1;
  const Tensor y1 = nn::conv2d_forward(plan1, ctx1, d.x, d.w, &d.b, &saved1);
  const nn::Conv2dGrads g1 = nn::conv2d_backward(plan1, ctx1, saved1, d.w, d.dy, true, true);
  return {y1, g1.dx, g1.dw, g1.db};
}

ConvOut sharded(const nn::ConvSpec& spec, const core::Layout& in, const ConvData& d,
                std::int64_t& halo_elems) {
  const core::DeviceMesh& mesh = in.mesh();
  const core::Layout out = nn::conv_output_layout(spec, in);
  const core::Layout in_r = core::Layout::replicated(mesh, in.global_shape());
  const core::Layout out_r = core::Layout::replicated(mesh, out.global_shape());
  ConvOut full;
  std::mutex mu;
  local_ranks(mesh.size(), [&](comm::Backend& world) {
    comm::MeshComm mc(mesh, world);
    const int r = world.rank();
    auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(r));
    auto cpu_r = make_compute(Device{});
    nn::RankContext ctx{&world, cpu_r.get(), alloc};
    const nn::HaloPlan plan = nn::make_halo_plan(spec, in, out, r);
    const Tensor xl = comm::redistribute(mc, d.x, in_r, in);
    const Tensor dyl = comm::redistribute(mc, d.dy, out_r, out);
    nn::Conv2dSaved saved;
    const Tensor y = nn::conv2d_forward(plan, ctx, xl, d.w, &d.b, &saved);
    nn::Conv2dGrads g = nn::conv2d_backward(plan, ctx, saved, d.w, dyl, true, true);
    mc.all_reduce(g.dw, plan.grad_reduce_mesh_dims);
    mc.all_reduce(g.db, plan.grad_reduce_mesh_dims);
    const Tensor yg = comm::redistribute(mc, y, out, out_r);
    const Tensor dxg = comm::redistribute(mc, g.dx, in, in_r);
    std::lock_guard<std::mutex> lock(mu);
    halo_elems += plan.recv_elems();
    if (r == 0) full = {yg, dxg, g.dw, g.db};
  });
  return full;
}

}  // namespace

bool VerifyConvResult::agree(double tolerance) const {
  return std::all_of(rel_errors.begin(), rel_errors.end(),
                     [tolerance](double e) { return e <= tolerance; });
}

VerifyConvResult verify_conv(const VerifyConvRequest& a) {
  const core::DeviceMesh mesh = core::DeviceMesh::parse(a.mesh);
  const std::vector<int> dims = parse_shard_dims(a.shard);
  TESSERA_CHECK(static_cast<int>(dims.size()) == mesh.ndim(), "--shard ", a.shard, " needs a ",
                dims.size(), "-d mesh; got ", mesh.to_string());
  std::vector<core::Placement> pl;
  for (int d : dims) pl.push_back(core::Shard(d));
  const int pad = a.pad >= 0 ? a.pad : a.dilation * (a.kernel - 1) / 2;
  const int groups = a.groups > 0 ? a.groups : a.c;  // default: depthwise
  VerifyConvResult res;
  res.spec = nn::ConvSpec::square(a.c, a.cout, a.kernel, a.stride, pad, a.dilation, groups);
  res.input = {a.n, a.c, a.h, a.w};
  res.mesh = mesh.to_string();
  const core::Layout in(mesh, res.input, pl), out = nn::conv_output_layout(res.spec, in);
  std::mt19937 gen(a.seed);
  // Drawn in this order (x, w, b, dy): the same seed gives the same data as before.
  ConvData d;
  d.x = random(res.input, gen);
  d.w = random(res.spec.weight_shape(), gen);
  d.b = random({a.cout}, gen);
  d.dy = random(out.global_shape(), gen);
  const ConvOut one = unsharded(res.spec, d);
  const ConvOut many = sharded(res.spec, in, d, res.halo_elements);
  res.rel_errors = {rel_diff(many.y, one.y), rel_diff(many.dx, one.dx), rel_diff(many.dw, one.dw),
                    rel_diff(many.db, one.db)};
  return res;
}

}  // namespace tessera::run
