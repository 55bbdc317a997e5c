// `tessera halo`: prints the halo plan of one convolution over a mesh — who sends which rows or
// columns to whom — for any kernel, stride, padding, dilation and shard count.
#include <algorithm>
#include <cctype>
#include <iostream>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/halo_plan.hpp"

namespace tessera::tools {

std::vector<int> parse_shard_dims(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::toupper(c); });
  if (u == "W") return {3};
  if (u == "H") return {2};
  if (u == "HW" || u == "TILES") return {2, 3};
  throw InvalidArgument("--shard '" + s + "': expected W, H or HW (2-D tiles)");
}

namespace {

struct HaloArgs {
  std::string input = "1x1x16x20";
  int kernel = 7, stride = 1, pad = -1, dilation = 1;
  std::string mesh = "sp=3";
  std::string shard = "W";
  bool strict = false;
};

core::Shape parse_nchw(const std::string& s) {
  core::Shape shape;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t x = s.find('x', pos);
    if (x == std::string::npos) x = s.size();
    try {
      shape.push_back(std::stoll(s.substr(pos, x - pos)));
    } catch (const std::exception&) {
      throw InvalidArgument("--input '" + s + "': expected NxCxHxW, e.g. 1x96x128x512");
    }
    pos = x + 1;
  }
  TESSERA_CHECK(shape.size() == 4, "--input '", s, "': expected 4 sizes NxCxHxW, got ", shape.size());
  return shape;
}

int run_halo(const HaloArgs& a) {
  const core::Shape in_shape = parse_nchw(a.input);
  const core::DeviceMesh mesh = core::DeviceMesh::parse(a.mesh);
  const std::vector<int> dims = parse_shard_dims(a.shard);
  TESSERA_CHECK(static_cast<int>(dims.size()) == mesh.ndim(), "--shard ", a.shard, " shards ",
                dims.size(), " dimension(s) but mesh ", mesh.to_string(), " has ", mesh.ndim(),
                "; use one mesh dimension per sharded dimension (e.g. --mesh sp_h=2,sp_w=2 --shard HW)");
  std::vector<core::Placement> pl;
  for (int d : dims) pl.push_back(core::Shard(d));
  const core::Layout in(mesh, in_shape, pl);
  const int pad = a.pad >= 0 ? a.pad : a.dilation * (a.kernel - 1) / 2;
  const nn::ConvSpec spec = nn::ConvSpec::square(in_shape[1], in_shape[1], a.kernel, a.stride, pad,
                                                 a.dilation, static_cast<int>(in_shape[1]), false);
  const core::Layout out = nn::conv_output_layout(spec, in);
  nn::HaloOptions opt;
  opt.allow_wide = !a.strict;
  std::cout << spec.describe() << "\n  input  " << in.to_string() << "\n  output " << out.to_string()
            << "\n\n";
  std::int64_t total = 0;
  for (int r = 0; r < mesh.size(); ++r) {
    const nn::HaloPlan p = nn::make_halo_plan(spec, in, out, r, opt);
    std::cout << p.describe();
    total += p.recv_elems();
  }
  std::cout << "\nhalo elements received in total: " << total << " ("
            << total * 4 << " bytes in fp32)\n";
  return 0;
}

}  // namespace

void add_halo_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<HaloArgs>();
  CLI::App* c = app.add_subcommand(
      "halo", "Print the halo plan of one convolution over a mesh: who sends which rows or columns to whom");
  c->footer(
      "Any square kernel, stride, padding and dilation, sharded along W, H or both (2-D tiles over a\n"
      "2-D mesh). The plan depends only on that geometry and the input's layout (every input channel\n"
      "travels), so it is the same for dense, grouped and depthwise convolutions; it is printed as\n"
      "the depthwise one (\"g96 96->96\" for C = 96). A halo wider than a neighbour's shard is served\n"
      "by every rank that owns part of it; --strict refuses it instead.");
  c->add_option("--input", args->input, "Input shape NxCxHxW (C scales the element counts only)")
      ->capture_default_str();
  c->add_option("-k,--kernel", args->kernel, "Kernel size")->capture_default_str();
  c->add_option("-s,--stride", args->stride, "Stride")->capture_default_str();
  c->add_option("-p,--pad", args->pad, "Padding (default: same-size, d*(k-1)/2)");
  c->add_option("-d,--dilation", args->dilation, "Dilation")->capture_default_str();
  c->add_option("--mesh", args->mesh, "Mesh, e.g. sp=4 or sp_h=2,sp_w=2")->capture_default_str();
  c->add_option("--shard", args->shard, "Sharded dimension(s): W, H or HW")->capture_default_str();
  c->add_flag("--strict", args->strict, "Refuse halos wider than a neighbour's shard");
  c->callback([&action, args] { action = [args] { return run_halo(*args); }; });
}

}  // namespace tessera::tools
