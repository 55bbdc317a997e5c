// halo_plan: every rank's halo plan of one depthwise convolution, and its text and JSON forms.
#include "tessera/run/halo.hpp"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tessera/core/error.hpp"

namespace tessera::run {

std::vector<int> parse_shard_dims(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::toupper(c); });
  if (u == "W") return {3};
  if (u == "H") return {2};
  if (u == "HW" || u == "TILES") return {2, 3};
  throw InvalidArgument("--shard '" + s + "': expected W, H or HW (2-D tiles)");
}

HaloReport halo_plan(const HaloRequest& a) {
  const core::Shape& in_shape = a.input;
  TESSERA_CHECK(in_shape.size() == 4, "halo: input shape ", core::shape_str(in_shape),
                " must be N,C,H,W");
  const core::DeviceMesh mesh = core::DeviceMesh::parse(a.mesh);
  const std::vector<int> dims = parse_shard_dims(a.shard);
  TESSERA_CHECK(
      static_cast<int>(dims.size()) == mesh.ndim(), "--shard ", a.shard, " shards ", dims.size(),
      " dimension(s) but mesh ", mesh.to_string(), " has ", mesh.ndim(),
      "; use one mesh dimension per sharded dimension (e.g. --mesh sp_h=2,sp_w=2 --shard HW)");
  std::vector<core::Placement> pl;
  for (int d : dims) pl.push_back(core::Shard(d));
  const core::Layout in(mesh, in_shape, pl);
  const int pad = a.pad >= 0 ? a.pad : a.dilation * (a.kernel - 1) / 2;
  const nn::ConvSpec spec = nn::ConvSpec::square(in_shape[1], in_shape[1], a.kernel, a.stride, pad,
                                                 a.dilation, static_cast<int>(in_shape[1]), false);
  HaloReport report{spec, in, nn::conv_output_layout(spec, in), {}};
  nn::HaloOptions opt;
  opt.allow_wide = !a.strict;
  for (int r = 0; r < mesh.size(); ++r)
    report.plans.push_back(nn::make_halo_plan(spec, in, report.out, r, opt));
  return report;
}

std::int64_t HaloReport::total_recv_elems() const {
  std::int64_t total = 0;
  for (const nn::HaloPlan& p : plans) total += p.recv_elems();
  return total;
}

std::string HaloReport::to_text() const {
  std::ostringstream os;
  os << spec.describe() << "\n  input  " << in.to_string() << "\n  output " << out.to_string()
     << "\n\n";
  for (const nn::HaloPlan& p : plans) os << p.describe();
  const std::int64_t total = total_recv_elems();
  os << "\nhalo elements received in total: " << total << " (" << total * 4 << " bytes in fp32)\n";
  return os.str();
}

namespace {

nlohmann::ordered_json pieces_json(const std::vector<nn::HaloPiece>& pieces) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const nn::HaloPiece& p : pieces)
    a.push_back({{"peer", p.peer}, {"box", p.box.to_string()}, {"elements", p.box.numel()}});
  return a;
}

}  // namespace

std::string HaloReport::to_json() const {
  nlohmann::ordered_json j;
  j["conv"] = spec.describe();
  j["input"] = in.to_string();
  j["output"] = out.to_string();
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (const nn::HaloPlan& p : plans)
    ranks.push_back({{"rank", p.rank},
                     {"own", p.own.to_string()},
                     {"need", p.need.to_string()},
                     {"out", p.out_box.to_string()},
                     {"recvs", pieces_json(p.recvs)},
                     {"sends", pieces_json(p.sends)},
                     {"recv_elements", p.recv_elems()}});
  j["ranks"] = std::move(ranks);
  j["recv_elements"] = total_recv_elems();
  j["recv_bytes_fp32"] = total_recv_elems() * 4;
  return j.dump(2);
}

}  // namespace tessera::run
