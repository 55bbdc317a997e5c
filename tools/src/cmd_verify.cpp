// `tessera verify conv`: runs one convolution sharded over in-process ranks and unsharded, and
// prints how far apart the outputs and every gradient are (they must agree to fp32 rounding).
#include <cstdio>

#include "commands.hpp"
#include "tessera/run/verify.hpp"

namespace tessera::tools {
namespace {

int run_verify(const run::VerifyConvRequest& a) {
  const run::VerifyConvResult r = run::verify_conv(a);
  std::printf("%s, input %s, %s sharded over %s\n", r.spec.describe().c_str(),
              core::shape_str(r.input).c_str(), a.shard.c_str(), r.mesh.c_str());
  std::printf("halo received by all ranks: %lld elements (%lld bytes fp32)\n",
              static_cast<long long>(r.halo_elements), static_cast<long long>(r.halo_elements * 4));
  std::printf("max |sharded - unsharded| / max |unsharded|:\n");
  for (std::size_t i = 0; i < r.rel_errors.size(); ++i)
    std::printf("  %-16s %.3e\n", run::VerifyConvResult::kNames[i], r.rel_errors[i]);
  const bool ok = r.agree(1e-5);
  std::printf("%s\n", ok ? "agree (<= 1e-5)" : "DISAGREE (> 1e-5)");
  return ok ? 0 : 2;
}

}  // namespace

void add_verify_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<run::VerifyConvRequest>();
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
