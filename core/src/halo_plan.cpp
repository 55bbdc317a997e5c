// make_halo_plan: box intersections between what each rank owns and what its outputs read.
#include "tessera/nn/halo_plan.hpp"

#include <algorithm>
#include <sstream>

#include "tessera/core/error.hpp"

namespace tessera::nn {

using core::Layout;
using core::Range;

bool Box::empty() const noexcept {
  return std::any_of(r.begin(), r.end(), [](const Range& x) { return x.empty(); });
}

std::int64_t Box::numel() const noexcept {
  std::int64_t n = 1;
  for (auto& x : r) n *= x.size();
  return n;
}

core::Shape Box::shape() const { return {r[0].size(), r[1].size(), r[2].size(), r[3].size()}; }

Box Box::intersect(const Box& o) const noexcept {
  Box b;
  for (int i = 0; i < 4; ++i) b.r[i] = r[i].intersect(o.r[i]);
  return b;
}

std::string Box::to_string() const {
  std::ostringstream os;
  const char* names = "nchw";
  for (int i = 0; i < 4; ++i) os << (i ? " " : "") << names[i] << "[" << r[i].begin << "," << r[i].end << ")";
  return os.str();
}

std::int64_t HaloPlan::recv_elems() const noexcept {
  std::int64_t n = 0;
  for (auto& p : recvs) n += p.box.numel();
  return n;
}

std::int64_t HaloPlan::send_elems() const noexcept {
  std::int64_t n = 0;
  for (auto& p : sends) n += p.box.numel();
  return n;
}

std::string HaloPlan::describe() const {
  std::ostringstream os;
  os << "rank " << rank << " " << spec.describe() << "\n  own  " << own.to_string() << "\n  need "
     << need.to_string() << "\n  out  " << out_box.to_string() << "\n";
  for (auto& p : recvs) os << "  recv from " << p.peer << ": " << p.box.to_string() << "\n";
  for (auto& p : sends) os << "  send to   " << p.peer << ": " << p.box.to_string() << "\n";
  return os.str();
}

namespace {

const char* dim_label(int d) { return d == 2 ? "H" : d == 3 ? "W" : d == 0 ? "N" : "C"; }

void check_layouts(const ConvSpec& spec, const Layout& in, const Layout& out) {
  spec.validate();
  TESSERA_CHECK(in.ndim() == 4, spec.describe(), ": input layout ", in.to_string(),
                " is not 4-d (N,C,H,W)");
  const core::Shape expected = spec.output_shape(in.global_shape());
  TESSERA_CHECK(out.global_shape() == expected, spec.describe(), ": output layout ", out.to_string(),
                " does not have the output shape ", core::shape_str(expected), " of input ",
                core::shape_str(in.global_shape()));
  TESSERA_CHECK(in.mesh() == out.mesh(), spec.describe(), ": input mesh ", in.mesh().to_string(),
                " and output mesh ", out.mesh().to_string(), " differ");
  for (int md = 0; md < in.mesh().ndim(); ++md) {
    const auto& p = in.placement(md);
    const std::string where = tessera::detail::cat(spec.describe(), ": mesh dimension '",
                                                   in.mesh().dim_name(md), "' places the input as ",
                                                   p.to_string());
    if (p.is_partial())
      throw InvalidArgument(where + ": a convolution needs its input summed; redistribute the "
                                    "Partial input to Replicate or Shard first");
    if (p.is_shard(1))
      throw Unsupported(where + ": sharding channels (Shard(1)) is not supported by the spatial "
                                "convolution; shard N, H or W, or replicate");
    TESSERA_CHECK(out.placement(md) == p, spec.describe(), ": mesh dimension '",
                  in.mesh().dim_name(md), "' places the input as ", p.to_string(),
                  " but the output as ", out.placement(md).to_string(),
                  "; a convolution keeps its input's placements");
  }
}

Box owned_box(const Layout& in, int rank) {
  Box b;
  for (int d = 0; d < 4; ++d) b.r[d] = in.local_range(rank, d);
  return b;
}

// What `rank`'s outputs read, clipped to the global input.
Box needed_box(const ConvSpec& spec, const Layout& in, const Layout& out, int rank) {
  Box b;
  b.r[0] = in.local_range(rank, 0);
  b.r[1] = Range{0, in.global_shape()[1]};
  const Range oh = out.local_range(rank, 2), ow = out.local_range(rank, 3);
  if (oh.empty() || ow.empty() || b.r[0].empty()) return Box{};  // produces nothing, needs nothing
  b.r[2] = conv_input_range(oh, conv_dim_h(spec)).intersect({0, in.global_shape()[2]});
  b.r[3] = conv_input_range(ow, conv_dim_w(spec)).intersect({0, in.global_shape()[3]});
  return b;
}

// With allow_wide off, a piece must come from a mesh neighbour (coordinates differ by ≤ 1).
void check_narrow(const ConvSpec& spec, const Layout& in, int rank, const HaloPiece& piece,
                  const Box& need, const Box& own) {
  const auto& mesh = in.mesh();
  const auto a = mesh.coords_of(rank), b = mesh.coords_of(piece.peer);
  for (int md = 0; md < mesh.ndim(); ++md) {
    if (std::abs(a[md] - b[md]) <= 1) continue;
    const int d = in.placement(md).dim();
    const Box peer_own = owned_box(in, piece.peer);
    const std::int64_t halo = std::max(own.r[d].begin - need.r[d].begin, need.r[d].end - own.r[d].end);
    throw InvalidArgument(tessera::detail::cat(
        spec.describe(), ": along ", dim_label(d), " (mesh dimension '", mesh.dim_name(md), "') rank ",
        rank, " needs a halo of ", halo, " (input ", dim_label(d), " range [", need.r[d].begin, ",",
        need.r[d].end, ") vs its own [", own.r[d].begin, ",", own.r[d].end,
        ")), wider than its neighbour's shard; rank ", piece.peer, " two or more steps away holds [",
        peer_own.r[d].begin, ",", peer_own.r[d].end,
        "). Use fewer shards along ", dim_label(d), ", a larger input, or allow multi-hop halos "
        "(HaloOptions::allow_wide)"));
  }
}

}  // namespace

HaloPlan make_halo_plan(const ConvSpec& spec, const Layout& in, const Layout& out, int rank,
                        const HaloOptions& options) {
  check_layouts(spec, in, out);
  const auto& mesh = in.mesh();
  TESSERA_CHECK(mesh.contains(rank), spec.describe(), ": rank ", rank, " is not in mesh ", mesh.to_string());

  HaloPlan plan;
  plan.rank = rank;
  plan.spec = spec;
  plan.in_shape = in.global_shape();
  plan.own = owned_box(in, rank);
  plan.need = needed_box(spec, in, out, rank);
  for (int d = 0; d < 4; ++d) plan.out_box.r[d] = out.local_range(rank, d);
  TESSERA_CHECK(plan.out_box.r[0] == plan.own.r[0], spec.describe(), ": input and output layouts split the batch differently on rank ", rank);

  std::vector<int> spatial_dims;
  for (int md = 0; md < mesh.ndim(); ++md) {
    const auto& p = in.placement(md);
    if (p.is_shard(2) || p.is_shard(3)) spatial_dims.push_back(md);
    if (p.is_shard()) plan.grad_reduce_mesh_dims.push_back(md);
  }
  plan.group = spatial_dims.empty() ? std::vector<int>{rank} : mesh.group_ranks(spatial_dims, rank);

  std::int64_t covered = plan.need.intersect(plan.own).numel();
  for (int peer : plan.group) {
    if (peer == rank) continue;
    const Box peer_own = owned_box(in, peer);
    const Box r = plan.need.intersect(peer_own);
    if (!r.empty()) {
      plan.recvs.push_back({peer, r});
      covered += r.numel();
      if (!options.allow_wide) check_narrow(spec, in, rank, plan.recvs.back(), plan.need, plan.own);
    }
    const Box s = plan.own.intersect(needed_box(spec, in, out, peer));
    if (!s.empty()) plan.sends.push_back({peer, s});
  }
  TESSERA_ASSERT(covered == plan.need.numel(), "rank ", rank, ": the owners of ", plan.need.to_string(),
                 " cover ", covered, " of ", plan.need.numel(), " elements");

  compute::Conv2dParams p = spec.params();
  if (!plan.need.empty()) {
    // Output row out_box.h.begin reads from global row out.begin·s − pad; the buffer starts at
    // need.h.begin, so the local offset is the distance between the two (≥ 0: need is clipped).
    p.pad_h = static_cast<int>(plan.need.r[2].begin - (plan.out_box.r[2].begin * spec.stride_h - spec.pad_h));
    p.pad_w = static_cast<int>(plan.need.r[3].begin - (plan.out_box.r[3].begin * spec.stride_w - spec.pad_w));
    TESSERA_ASSERT(p.pad_h >= 0 && p.pad_w >= 0, "negative local padding on rank ", rank);
  }
  plan.local_params = p;
  return plan;
}

Layout conv_output_layout(const ConvSpec& spec, const Layout& in) {
  const core::Shape out_shape = spec.output_shape(in.global_shape());
  core::Shape align = in.align();
  const int strides[4] = {1, 1, spec.stride_h, spec.stride_w};
  for (int d = 0; d < 4; ++d) align[d] = (align[d] % strides[d] == 0) ? align[d] / strides[d] : 1;
  align[1] = 1;
  return Layout(in.mesh(), out_shape, in.placements(), align);
}

}  // namespace tessera::nn
