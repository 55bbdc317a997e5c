// DeviceMesh and Layout: coordinates, sub-groups, balanced uneven splits, nested sharding.
#include "support/catch.hpp"
#include "tessera/core/layout.hpp"

using namespace tessera;
using core::DeviceMesh;
using core::Layout;
using core::Range;

TEST_CASE("device mesh coordinates and sub-groups", "[core][mesh]") {
  const DeviceMesh m = DeviceMesh::parse("dp=2,sp=3");
  REQUIRE(m.size() == 6);
  REQUIRE(m.to_string() == "dp=2,sp=3");
  REQUIRE(m.coords_of(4) == std::vector<int>{1, 1});
  REQUIRE(m.rank_at({1, 2}) == 5);
  REQUIRE(m.group_ranks(m.dim_index("sp"), 4) == std::vector<int>{3, 4, 5});
  REQUIRE(m.group_ranks(0, 4) == std::vector<int>{1, 4});
  REQUIRE(m.group_ranks(std::vector<int>{0, 1}, 2) == std::vector<int>{0, 1, 2, 3, 4, 5});
  const DeviceMesh custom({2}, {"sp"}, {5, 3});
  REQUIRE(custom.coords_of(3) == std::vector<int>{1});
  REQUIRE_THROWS_AS(custom.coords_of(0), InvalidArgument);
}

TEST_CASE("invalid meshes are refused with a message that says what to fix", "[core][mesh][errors]") {
  auto msg_of = [](auto&& fn) {
    try {
      fn();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  REQUIRE_THAT(msg_of([] { DeviceMesh({2, 0}); }), Catch::Matchers::Contains("at least one rank"));
  REQUIRE_THAT(msg_of([] { DeviceMesh({2, 2}, {"sp", "sp"}); }), Catch::Matchers::Contains("used twice"));
  REQUIRE_THAT(msg_of([] { DeviceMesh({2}, {"sp"}, {1, 1}); }), Catch::Matchers::Contains("distinct"));
  REQUIRE_THAT(msg_of([] { DeviceMesh::parse("sp4"); }), Catch::Matchers::Contains("NAME=SIZE"));
  REQUIRE_THAT(msg_of([] { DeviceMesh::parse("sp=-2"); }), Catch::Matchers::Contains("positive integer"));
  REQUIRE_THAT(msg_of([] { DeviceMesh::parse("dp=2,sp=x"); }), Catch::Matchers::Contains("'x'"));
  REQUIRE_THAT(msg_of([] { DeviceMesh::parse("sp=2").dim_index("dp"); }), Catch::Matchers::Contains("no dimension named 'dp'"));
}

TEST_CASE("balanced splits differ by at most one unit", "[core][layout]") {
  // 20 over 3: 7, 7, 6.
  REQUIRE(core::balanced_split(20, 3, 0) == Range{0, 7});
  REQUIRE(core::balanced_split(20, 3, 1) == Range{7, 14});
  REQUIRE(core::balanced_split(20, 3, 2) == Range{14, 20});
  // 2 over 3: the last part is empty.
  REQUIRE(core::balanced_split(2, 3, 2).empty());
  // Units of 4: 10 units of 4 (= 40) over 3 parts → 16, 12, 12.
  REQUIRE(core::balanced_split(40, 3, 0) == Range{0, 14});
  REQUIRE(core::balanced_split(40, 3, 0, 4) == Range{0, 16});
  REQUIRE(core::balanced_split(40, 3, 2, 4) == Range{28, 40});
  // A final partial unit goes to the last non-empty part: 10 in units of 4 over 2 → 8, 2.
  REQUIRE(core::balanced_split(10, 2, 0, 4) == Range{0, 8});
  REQUIRE(core::balanced_split(10, 2, 1, 4) == Range{8, 10});
  for (int len : {0, 1, 5, 17, 64})
    for (int parts : {1, 2, 3, 7}) {
      std::int64_t next = 0, mn = len, mx = 0;
      for (int i = 0; i < parts; ++i) {
        const Range r = core::balanced_split(len, parts, i);
        REQUIRE(r.begin == next);
        next = r.end;
        mn = std::min(mn, r.size());
        mx = std::max(mx, r.size());
      }
      REQUIRE(next == len);
      REQUIRE(mx - mn <= 1);
    }
}

TEST_CASE("layout local shapes and offsets on a 2-d mesh", "[core][layout]") {
  const DeviceMesh m({2, 3}, {"sp_h", "sp_w"});
  const Layout l(m, {2, 8, 9, 20}, {core::Shard(2), core::Shard(3)});
  REQUIRE(l.local_shape(0) == core::Shape{2, 8, 5, 7});
  REQUIRE(l.local_shape(5) == core::Shape{2, 8, 4, 6});
  REQUIRE(l.local_offset(5) == core::Shape{0, 0, 5, 14});
  REQUIRE(l.mesh_dims_sharding(3) == std::vector<int>{1});
  REQUIRE(l.to_string() == "[2,8,9,20] (S(2),S(3)) on sp_h=2,sp_w=3");
  std::int64_t total = 0;
  for (int r = 0; r < 6; ++r) total += core::shape_numel(l.local_shape(r));
  REQUIRE(total == 2 * 8 * 9 * 20);
}

TEST_CASE("nested sharding splits in mesh order, replicate and partial keep the shape", "[core][layout]") {
  const DeviceMesh m({2, 2}, {"a", "b"});
  const Layout nested(m, {1, 1, 1, 10}, {core::Shard(3), core::Shard(3)});
  // a splits [0,10) into [0,5) [5,10); b splits each again: [0,3) [3,5) [5,8) [8,10).
  REQUIRE(nested.local_range(0, 3) == Range{0, 3});
  REQUIRE(nested.local_range(1, 3) == Range{3, 5});
  REQUIRE(nested.local_range(2, 3) == Range{5, 8});
  REQUIRE(nested.local_range(3, 3) == Range{8, 10});
  const Layout rp(m, {4, 4}, {core::Replicate(), core::Partial()});
  REQUIRE(rp.local_shape(3) == core::Shape{4, 4});
  REQUIRE(rp.has_partial());
  REQUIRE_THROWS_AS(Layout(m, {4, 4}, {core::Shard(2), core::Replicate()}), InvalidArgument);
  REQUIRE_THROWS_AS(Layout(m, {4, 4}, {core::Replicate()}), InvalidArgument);
}
