// HaloPlan: the worked examples of docs/halo-exchange.md, and the plan's invariants.
#include "support/catch.hpp"
#include "tessera/nn/halo_plan.hpp"

using namespace tessera;
using core::Range;

namespace {
nn::HaloPlan plan_for(const nn::ConvSpec& spec, const core::Layout& in, int rank, nn::HaloOptions o = {}) {
  return nn::make_halo_plan(spec, in, nn::conv_output_layout(spec, in), rank, o);
}
}  // namespace

TEST_CASE("conv output size and input range formulas", "[nn][halo]") {
  const nn::ConvDim d7{7, 1, 3, 1}, d3s2{3, 2, 1, 1}, d5d2{5, 1, 4, 2};
  REQUIRE(nn::conv_output_size(20, d7) == 20);
  REQUIRE(nn::conv_output_size(20, d3s2) == 10);
  REQUIRE(nn::conv_output_size(20, d5d2) == 20);
  REQUIRE(nn::conv_output_size(4, nn::ConvDim{7, 1, 0, 1}) == 0);
  // [a·s − p, (b−1)·s − p + d·(k−1) + 1)
  REQUIRE(nn::conv_input_range({7, 14}, d7) == Range{4, 17});
  REQUIRE(nn::conv_input_range({4, 7}, d3s2) == Range{7, 14});
  REQUIRE(nn::conv_input_range({0, 3}, d5d2) == Range{-4, 7});
  REQUIRE(nn::conv_input_range({3, 3}, d7).empty());
}

TEST_CASE("7x7/s1/p3 over 3 uneven shards of W=20 (docs/halo-exchange.md)", "[nn][halo]") {
  const core::Layout in(core::DeviceMesh({3}, {"sp"}), {1, 1, 4, 20}, {core::Shard(3)});
  const auto spec = nn::ConvSpec::square(1, 1, 7, 1, 3, 1, 1, false);
  // Shards: [0,7) [7,14) [14,20).
  const auto p0 = plan_for(spec, in, 0), p1 = plan_for(spec, in, 1), p2 = plan_for(spec, in, 2);
  REQUIRE(p1.own.r[3] == Range{7, 14});
  REQUIRE(p1.need.r[3] == Range{4, 17});
  REQUIRE(p1.recvs.size() == 2);
  REQUIRE(p1.recvs[0].peer == 0);
  REQUIRE(p1.recvs[0].box.r[3] == Range{4, 7});
  REQUIRE(p1.recvs[1].peer == 2);
  REQUIRE(p1.recvs[1].box.r[3] == Range{14, 17});
  REQUIRE(p0.need.r[3] == Range{0, 10});  // left: zero padding, nobody sends it
  REQUIRE(p0.local_params.pad_w == 3);
  REQUIRE(p1.local_params.pad_w == 0);
  REQUIRE(p2.need.r[3] == Range{11, 20});
  REQUIRE(p2.sends.size() == 1);
  REQUIRE(p2.sends[0].peer == 1);
  REQUIRE(p2.sends[0].box.r[3] == Range{14, 17});
  REQUIRE(p1.recv_elems() == 2 * 4 * 3);
}

TEST_CASE("3x3/s2/p1 over 3 uneven shards: left and right halos differ", "[nn][halo]") {
  const core::Layout in(core::DeviceMesh({3}, {"sp"}), {1, 1, 4, 20}, {core::Shard(3)});
  const auto spec = nn::ConvSpec::square(1, 1, 3, 2, 1, 1, 1, false);
  // Input shards [0,7) [7,14) [14,20); output (10 columns) shards [0,4) [4,7) [7,10).
  const auto p0 = plan_for(spec, in, 0), p1 = plan_for(spec, in, 1), p2 = plan_for(spec, in, 2);
  REQUIRE(p0.out_box.r[3] == Range{0, 4});
  REQUIRE(p0.need.r[3] == Range{0, 8});  // outputs 0..3 read columns −1..7: column 7 is rank 1's
  REQUIRE(p0.recvs.size() == 1);
  REQUIRE(p0.recvs[0].peer == 1);
  REQUIRE(p0.recvs[0].box.r[3] == Range{7, 8});
  REQUIRE(p1.out_box.r[3] == Range{4, 7});
  REQUIRE(p1.need.r[3] == Range{7, 14});  // outputs 4..6 read 7..13: exactly its own
  REQUIRE(p1.recvs.empty());
  REQUIRE(p2.out_box.r[3] == Range{7, 10});
  REQUIRE(p2.need.r[3] == Range{13, 20});  // reads column 13 from rank 1: a left halo only
  REQUIRE(p2.recvs.size() == 1);
  REQUIRE(p2.recvs[0].peer == 1);
  REQUIRE(p2.recvs[0].box.r[3] == Range{13, 14});
  REQUIRE(p1.sends.size() == 2);  // column 7 to the left, column 13 to the right
  REQUIRE(p1.sends[0].peer == 0);
  REQUIRE(p1.sends[0].box.r[3] == Range{7, 8});
  REQUIRE(p1.sends[1].peer == 2);
  REQUIRE(p1.sends[1].box.r[3] == Range{13, 14});
}

TEST_CASE("2-D tiles receive their corners from the diagonal neighbour", "[nn][halo]") {
  const core::Layout in(core::DeviceMesh({2, 2}, {"sp_h", "sp_w"}), {1, 2, 8, 8},
                        {core::Shard(2), core::Shard(3)});
  const auto spec = nn::ConvSpec::square(2, 2, 3, 1, 1);
  const auto p = plan_for(spec, in, 0);  // top-left tile [0,4)x[0,4), needs [0,5)x[0,5)
  REQUIRE(p.recvs.size() == 3);
  REQUIRE(p.recvs[0].peer == 1);  // right: rows [0,4), column 4
  REQUIRE(p.recvs[0].box.r[2] == Range{0, 4});
  REQUIRE(p.recvs[0].box.r[3] == Range{4, 5});
  REQUIRE(p.recvs[1].peer == 2);  // below: row 4, columns [0,4)
  REQUIRE(p.recvs[2].peer == 3);  // corner: row 4, column 4
  REQUIRE(p.recvs[2].box.numel() == 1 * 2 * 1 * 1);
  REQUIRE(p.group == std::vector<int>{0, 1, 2, 3});
  REQUIRE(p.grad_reduce_mesh_dims == std::vector<int>{0, 1});
}

TEST_CASE("a halo wider than a shard is served by every owner, or refused", "[nn][halo]") {
  // W=12 over 6 ranks: shards of 2 columns; a 7x7 kernel needs 3 on each side.
  const core::Layout in(core::DeviceMesh({6}, {"sp"}), {1, 1, 7, 12}, {core::Shard(3)});
  const auto spec = nn::ConvSpec::square(1, 1, 7, 1, 3);
  const auto p = plan_for(spec, in, 2);  // owns [4,6), needs [1,9)
  REQUIRE(p.need.r[3] == Range{1, 9});
  REQUIRE(p.recvs.size() == 4);  // ranks 0, 1 on the left; 3, 4 on the right
  REQUIRE(p.recvs.front().peer == 0);
  REQUIRE(p.recvs.back().peer == 4);
  nn::HaloOptions strict;
  strict.allow_wide = false;
  try {
    plan_for(spec, in, 2, strict);
    FAIL("a wide halo was not refused");
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    REQUIRE_THAT(msg, Catch::Matchers::Contains("wider than its neighbour's shard"));
    REQUIRE_THAT(msg, Catch::Matchers::Contains("mesh dimension 'sp'"));
    REQUIRE_THAT(msg, Catch::Matchers::Contains("fewer shards along W"));
  }
}

TEST_CASE("every input element a rank needs comes from exactly one owner", "[nn][halo]") {
  const core::Layout in(core::DeviceMesh({3, 2}, {"sp_h", "sp_w"}), {2, 3, 11, 9},
                        {core::Shard(2), core::Shard(3)});
  for (auto spec : {nn::ConvSpec::square(3, 3, 5, 2, 2, 1, 3), nn::ConvSpec::square(3, 1, 3, 1, 2, 2)}) {
    std::int64_t sent = 0, received = 0;
    for (int r = 0; r < 6; ++r) {
      const auto p = plan_for(spec, in, r);
      received += p.recv_elems();
      sent += p.send_elems();
      REQUIRE(p.need.intersect(p.own).numel() + p.recv_elems() == p.need.numel());
    }
    REQUIRE(sent == received);
  }
}

TEST_CASE("conv output layout divides the alignment by the stride", "[nn][halo]") {
  const core::Layout in(core::DeviceMesh({3}, {"sp"}), {1, 3, 64, 2048}, {core::Shard(3)}, {1, 1, 1, 32});
  const auto stem = nn::ConvSpec::square(3, 8, 4, 4, 0);
  const auto out = nn::conv_output_layout(stem, in);
  REQUIRE(out.align()[3] == 8);
  for (int r = 0; r < 3; ++r) {
    // Aligned shards make a patchify stem halo-free.
    REQUIRE(in.local_range(r, 3).begin == 4 * out.local_range(r, 3).begin);
    REQUIRE_FALSE(nn::make_halo_plan(stem, in, out, r).exchanges());
  }
}
