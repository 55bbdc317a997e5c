// `tessera halo`: prints the halo plan of one convolution over a mesh — who sends which rows or
// columns to whom — for any kernel, stride, padding, dilation and shard count.
#include <iostream>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/halo.hpp"

namespace tessera::tools {

namespace {

/// The options bind to the request's fields, so its defaults are the command's; only the input
/// arrives as text (NxCxHxW).
struct HaloArgs {
  run::HaloRequest request;
  std::string input = "1x1x16x20";
  bool json = false;
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
  TESSERA_CHECK(shape.size() == 4, "--input '", s, "': expected 4 sizes NxCxHxW, got ",
                shape.size());
  return shape;
}

int run_halo(const HaloArgs& a) {
  run::HaloRequest r = a.request;
  r.input = parse_nchw(a.input);
  const run::HaloReport report = run::halo_plan(r);
  std::cout << (a.json ? report.to_json() + "\n" : report.to_text());
  return 0;
}

}  // namespace

void add_halo_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<HaloArgs>();
  CLI::App* c = app.add_subcommand("halo",
                                   "Print the halo plan of one convolution over a mesh: who sends "
                                   "which rows or columns to whom");
  c->footer(
      "Any square kernel, stride, padding and dilation, sharded along W, H or both (2-D tiles over "
      "a\n"
      "2-D mesh). The plan depends only on that geometry and the input's layout (every input "
      "channel\n"
      "travels), so it is the same for dense, grouped and depthwise convolutions; it is printed "
      "as\n"
      "the depthwise one (\"g96 96->96\" for C = 96). A halo wider than a neighbour's shard is "
      "served\n"
      "by every rank that owns part of it; --strict refuses it instead.");
  c->add_option("--input", args->input, "Input shape NxCxHxW (C scales the element counts only)")
      ->capture_default_str();
  run::HaloRequest& r = args->request;
  c->add_option("-k,--kernel", r.kernel, "Kernel size")->capture_default_str();
  c->add_option("-s,--stride", r.stride, "Stride")->capture_default_str();
  c->add_option("-p,--pad", r.pad, "Padding (default: same-size, d*(k-1)/2)");
  c->add_option("-d,--dilation", r.dilation, "Dilation")->capture_default_str();
  c->add_option("--mesh", r.mesh, "Mesh, e.g. sp=4 or sp_h=2,sp_w=2")->capture_default_str();
  c->add_option("--shard", r.shard, "Sharded dimension(s): W, H or HW")->capture_default_str();
  c->add_flag("--strict", r.strict, "Refuse halos wider than a neighbour's shard");
  c->add_flag("--json", args->json,
              "Print the plans as one JSON object (every rank's boxes and messages)");
  c->callback([&action, args] { action = [args] { return run_halo(*args); }; });
}

}  // namespace tessera::tools
