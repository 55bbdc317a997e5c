// `tessera verify conv`: runs one convolution sharded over in-process ranks and unsharded, and
// prints how far apart the outputs and every gradient are (they must agree to fp32 rounding).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <random>

#include "commands.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/comm/redistribute.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/conv2d.hpp"

namespace tessera::tools {
namespace {

struct VerifyArgs {
  int n = 2, c = 16, cout = 16, h = 37, w = 53;
  int kernel = 7, stride = 1, pad = -1, dilation = 1, groups = 0;
  std::string mesh = "sp=3";
  std::string shard = "W";
  unsigned seed = 1;
};

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

int run_verify(const VerifyArgs& a) {
  const core::DeviceMesh mesh = core::DeviceMesh::parse(a.mesh);
  const std::vector<int> dims = parse_shard_dims(a.shard);
  TESSERA_CHECK(static_cast<int>(dims.size()) == mesh.ndim(), "--shard ", a.shard, " needs a ",
                dims.size(), "-d mesh; got ", mesh.to_string());
  std::vector<core::Placement> pl;
  for (int d : dims) pl.push_back(core::Shard(d));
  const int pad = a.pad >= 0 ? a.pad : a.dilation * (a.kernel - 1) / 2;
  const int groups = a.groups > 0 ? a.groups : a.c;  // default: depthwise
  const nn::ConvSpec spec = nn::ConvSpec::square(a.c, a.cout, a.kernel, a.stride, pad, a.dilation, groups);
  const core::Shape xs{a.n, a.c, a.h, a.w};
  const core::Layout in(mesh, xs, pl), out = nn::conv_output_layout(spec, in);
  const core::Layout in_r = core::Layout::replicated(mesh, xs), out_r = core::Layout::replicated(mesh, out.global_shape());
  std::mt19937 gen(a.seed);
  const Tensor x = random(xs, gen), w = random(spec.weight_shape(), gen), b = random({a.cout}, gen);
  const Tensor dy = random(out.global_shape(), gen);

  // Unsharded: the same op on one rank.
  compute::Registry computes;
  register_builtin_backends(computes);
  auto cpu = computes.create("cpu", compute::BackendOptions{});
  const core::DeviceMesh one({1}, {"sp"});
  const core::Layout in1(one, xs, {core::Shard(3)}), out1 = nn::conv_output_layout(spec, in1);
  const nn::HaloPlan plan1 = nn::make_halo_plan(spec, in1, out1, 0);
  nn::RankContext ctx1{nullptr, cpu.get(), nullptr};
  nn::Conv2dSaved saved1;
  const Tensor y1 = nn::conv2d_forward(plan1, ctx1, x, w, &b, &saved1);
  const nn::Conv2dGrads g1 = nn::conv2d_backward(plan1, ctx1, saved1, w, dy, true, true);

  Tensor y_full, dx_full, dw0, db0;
  std::int64_t halo_elems = 0;
  std::mutex mu;
  comm::local::run(mesh.size(), [&](comm::Backend& world) {
    comm::MeshComm mc(mesh, world);
    const int r = world.rank();
    auto alloc = std::make_shared<core::Allocator>("rank " + std::to_string(r));
    auto cpu_r = computes.create("cpu", compute::BackendOptions{});
    nn::RankContext ctx{&world, cpu_r.get(), alloc};
    const nn::HaloPlan plan = nn::make_halo_plan(spec, in, out, r);
    const Tensor xl = comm::redistribute(mc, x, in_r, in);
    const Tensor dyl = comm::redistribute(mc, dy, out_r, out);
    nn::Conv2dSaved saved;
    const Tensor y = nn::conv2d_forward(plan, ctx, xl, w, &b, &saved);
    nn::Conv2dGrads g = nn::conv2d_backward(plan, ctx, saved, w, dyl, true, true);
    mc.all_reduce(g.dw, plan.grad_reduce_mesh_dims);
    mc.all_reduce(g.db, plan.grad_reduce_mesh_dims);
    const Tensor yg = comm::redistribute(mc, y, out, out_r);
    const Tensor dxg = comm::redistribute(mc, g.dx, in, in_r);
    std::lock_guard<std::mutex> lock(mu);
    halo_elems += plan.recv_elems();
    if (r == 0) {
      y_full = yg;
      dx_full = dxg;
      dw0 = g.dw;
      db0 = g.db;
    }
  });
  std::printf("%s, input %s, %s sharded over %s\n", spec.describe().c_str(),
              core::shape_str(xs).c_str(), a.shard.c_str(), mesh.to_string().c_str());
  std::printf("halo received by all ranks: %lld elements (%lld bytes fp32)\n",
              static_cast<long long>(halo_elems), static_cast<long long>(halo_elems * 4));
  std::printf("max |sharded - unsharded| / max |unsharded|:\n");
  const double e[4] = {rel_diff(y_full, y1), rel_diff(dx_full, g1.dx), rel_diff(dw0, g1.dw), rel_diff(db0, g1.db)};
  const char* names[4] = {"output", "input gradient", "weight gradient", "bias gradient"};
  bool ok = true;
  for (int i = 0; i < 4; ++i) {
    std::printf("  %-16s %.3e\n", names[i], e[i]);
    ok = ok && e[i] <= 1e-5;
  }
  std::printf("%s\n", ok ? "agree (<= 1e-5)" : "DISAGREE (> 1e-5)");
  return ok ? 0 : 2;
}

}  // namespace

void add_verify_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<VerifyArgs>();
  CLI::App* v = app.add_subcommand("verify", "Check a sharded op against the unsharded one");
  v->require_subcommand(1);
  CLI::App* c = v->add_subcommand("conv", "Sharded conv2d vs unsharded: output and gradients");
  c->add_option("--batch", a->n, "N")->capture_default_str();
  c->add_option("--channels", a->c, "input channels")->capture_default_str();
  c->add_option("--out-channels", a->cout, "output channels")->capture_default_str();
  c->add_option("--height", a->h, "H")->capture_default_str();
  c->add_option("--width", a->w, "W")->capture_default_str();
  c->add_option("-k,--kernel", a->kernel, "kernel size")->capture_default_str();
  c->add_option("-s,--stride", a->stride, "stride")->capture_default_str();
  c->add_option("-p,--pad", a->pad, "padding (default d*(k-1)/2)");
  c->add_option("-d,--dilation", a->dilation, "dilation")->capture_default_str();
  c->add_option("-g,--groups", a->groups, "groups (default: depthwise)");
  c->add_option("--mesh", a->mesh, "mesh, e.g. sp=4 or sp_h=2,sp_w=2")->capture_default_str();
  c->add_option("--shard", a->shard, "W, H or HW")->capture_default_str();
  c->add_option("--seed", a->seed, "random seed")->capture_default_str();
  c->callback([&action, a] { action = [a] { return run_verify(*a); }; });
}

}  // namespace tessera::tools
