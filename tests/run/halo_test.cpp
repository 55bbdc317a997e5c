// The halo plan as data: every rank's plan of one convolution, the totals, the text `tessera halo`
// prints and the JSON form, and the refusals (a shard that does not fit the mesh, strict wide
// halos).
#include <nlohmann/json.hpp>
#include <string>

#include "run/expect.hpp"
#include "support/catch.hpp"
#include "tessera/run/halo.hpp"

using namespace tessera;
using runtest::has;
using runtest::message;

TEST_CASE("halo: a 7x7 kernel over three W shards receives three columns per neighbour", "[run]") {
  // 1x1x16x20 over sp=3: shards 7, 7, 6 columns; pad 3. Rank 0 needs columns [7,10) of rank 1,
  // rank 1 [4,7) of rank 0 and [14,17) of rank 2, rank 2 [11,14) of rank 1: 3 columns × 16 rows
  // each.
  const run::HaloReport r = run::halo_plan(run::HaloRequest{});
  REQUIRE(r.plans.size() == 3);
  REQUIRE(r.plans[0].recvs.size() == 1);
  REQUIRE(r.plans[1].recvs.size() == 2);
  REQUIRE(r.plans[2].recvs.size() == 1);
  REQUIRE(r.plans[0].recvs[0].peer == 1);
  REQUIRE(r.plans[0].recvs[0].box.r[3].begin == 7);
  REQUIRE(r.plans[0].recvs[0].box.r[3].end == 10);
  REQUIRE(r.plans[0].recv_elems() == 48);
  REQUIRE(r.plans[1].recv_elems() == 96);
  REQUIRE(r.plans[2].recv_elems() == 48);
  REQUIRE(r.total_recv_elems() == 192);
  const std::string text = r.to_text();
  REQUIRE(text.rfind(r.spec.describe() + "\n  input  ", 0) == 0);
  REQUIRE(has(text, "\nhalo elements received in total: 192 (768 bytes in fp32)\n"));
  for (const auto& p : r.plans) REQUIRE(has(text, p.describe()));
}

TEST_CASE("halo: the JSON form holds every rank's boxes, messages and the totals", "[run]") {
  run::HaloRequest q;
  q.input = {1, 4, 12, 12};
  q.kernel = 3;
  q.mesh = "sp_h=2,sp_w=2";
  q.shard = "HW";
  const run::HaloReport r = run::halo_plan(q);
  const nlohmann::json j = nlohmann::json::parse(r.to_json());
  REQUIRE(j["conv"] == r.spec.describe());
  REQUIRE(j["ranks"].size() == 4);
  std::int64_t sum = 0;
  for (std::size_t k = 0; k < 4; ++k) {
    const auto& rank = j["ranks"][k];
    REQUIRE(rank["rank"] == static_cast<int>(k));
    REQUIRE(rank["own"] == r.plans[k].own.to_string());
    REQUIRE(rank["recvs"].size() == r.plans[k].recvs.size());
    std::int64_t elems = 0;
    for (const auto& m : rank["recvs"]) elems += m["elements"].get<std::int64_t>();
    REQUIRE(elems == rank["recv_elements"].get<std::int64_t>());
    sum += elems;
  }
  // 2x2 tiles of 6x6, one row/column of halo on the inner sides and one corner: 4 channels ×
  // (6 + 6 + 1) per rank.
  REQUIRE(sum == 4 * 4 * 13);
  REQUIRE(j["recv_elements"] == sum);
  REQUIRE(j["recv_bytes_fp32"] == 4 * sum);
}

TEST_CASE("halo: a shard that does not fit the mesh and strict wide halos are refused", "[run]") {
  run::HaloRequest q;
  q.shard = "HW";  // two dimensions over the one-dimensional sp=3
  REQUIRE(has(message([&] { run::halo_plan(q); }),
              "--shard HW shards 2 dimension(s) but mesh sp=3 has 1"));
  q.shard = "Z";
  REQUIRE(has(message([&] { run::halo_plan(q); }), "--shard 'Z': expected W, H or HW"));
  run::HaloRequest wide;
  wide.mesh = "sp=8";  // 20 columns over 8 ranks: shards of 2 or 3, a halo of 3
  REQUIRE(run::halo_plan(wide).total_recv_elems() > 0);
  wide.strict = true;
  REQUIRE_FALSE(message([&] { run::halo_plan(wide); }).empty());
}

TEST_CASE("halo: parse_shard_dims names the tensor dimensions", "[run]") {
  REQUIRE(run::parse_shard_dims("W") == std::vector<int>{3});
  REQUIRE(run::parse_shard_dims("h") == std::vector<int>{2});
  REQUIRE(run::parse_shard_dims("hw") == std::vector<int>{2, 3});
  REQUIRE(run::parse_shard_dims("tiles") == std::vector<int>{2, 3});
}
