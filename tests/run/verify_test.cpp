// verify conv as a function: the sharded convolution equals the unsharded one to fp32 rounding,
// forward and backward, for W, H and 2-D tile sharding, strided and dense; the halo count is the
// sum of the ranks' halo plans.
#include <string>

#include "support/catch.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/halo_plan.hpp"
#include "tessera/run/verify.hpp"

using namespace tessera;

namespace {

/// The halo elements every rank of `q`'s convolution receives, from core's plans directly.
std::int64_t planned_halo(const run::VerifyConvResult& r, const std::string& mesh_text,
                          const std::vector<core::Placement>& pl) {
  const core::DeviceMesh mesh = core::DeviceMesh::parse(mesh_text);
  const core::Layout in(mesh, r.input, pl), out = nn::conv_output_layout(r.spec, in);
  std::int64_t total = 0;
  for (int k = 0; k < mesh.size(); ++k)
    total += nn::make_halo_plan(r.spec, in, out, k).recv_elems();
  return total;
}

}  // namespace

TEST_CASE("verify: a W-sharded depthwise convolution agrees with the unsharded one", "[run]") {
  const run::VerifyConvResult r = run::verify_conv(run::VerifyConvRequest{});
  REQUIRE(r.mesh == "sp=3");
  REQUIRE(r.agree(1e-5));
  for (double e : r.rel_errors) REQUIRE(e <= 1e-5);
  // Rounding, not identity: the sharded weight gradient is a sum taken in another order.
  REQUIRE(r.halo_elements > 0);
  REQUIRE(r.halo_elements == planned_halo(r, "sp=3", {core::Shard(3)}));
}

TEST_CASE("verify: H, 2-D tiles and a strided dense convolution agree too", "[run]") {
  run::VerifyConvRequest q;
  q.n = 1;
  q.c = 4;
  q.cout = 4;
  q.h = 21;
  q.w = 19;
  q.kernel = 3;
  SECTION("H over 2 ranks") {
    q.mesh = "sp=2";
    q.shard = "H";
    const run::VerifyConvResult r = run::verify_conv(q);
    REQUIRE(r.agree());
    REQUIRE(r.halo_elements == planned_halo(r, q.mesh, {core::Shard(2)}));
  }
  SECTION("2x2 tiles, stride 2, dense") {
    q.mesh = "sp_h=2,sp_w=2";
    q.shard = "HW";
    q.stride = 2;
    q.groups = 1;
    q.cout = 6;
    const run::VerifyConvResult r = run::verify_conv(q);
    REQUIRE(r.spec.groups == 1);
    REQUIRE(r.agree());
    REQUIRE(r.halo_elements == planned_halo(r, q.mesh, {core::Shard(2), core::Shard(3)}));
  }
}

TEST_CASE("verify: the tolerance decides agreement, and a bad sharding is refused", "[run]") {
  run::VerifyConvResult r;
  r.rel_errors = {1e-7, 2e-6, 3e-4, 0};
  REQUIRE_FALSE(r.agree(1e-5));
  REQUIRE(r.agree(1e-3));
  run::VerifyConvRequest q;
  q.shard = "HW";
  std::string m;
  try {
    run::verify_conv(q);
  } catch (const InvalidArgument& e) {
    m = e.what();
  }
  REQUIRE(m == "--shard HW needs a 2-d mesh; got sp=3");
}
