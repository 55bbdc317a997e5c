// The backward halo exchange is the exact adjoint of the forward: ⟨E x, y⟩ = ⟨x, Eᵀ y⟩ in float64.
#include <mutex>

#include "support/test_utils.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/nn/halo_exchange.hpp"

using namespace tessera;

namespace {

struct AdjointSums {
  double ex_y = 0;   // Σ_r ⟨(E x)_r, y_r⟩
  double x_ety = 0;  // Σ_r ⟨x_r, (Eᵀ y)_r⟩
};

AdjointSums adjoint_sums(const nn::ConvSpec& spec, const core::Layout& in, std::uint64_t seed) {
  const core::Layout out = nn::conv_output_layout(spec, in);
  AdjointSums sums;
  std::mutex mu;
  comm::local::run(in.mesh().size(), [&](comm::Backend& world) {
    const int rank = world.rank();
    auto alloc = std::make_shared<core::Allocator>();
    const nn::HaloPlan plan = nn::make_halo_plan(spec, in, out, rank);
    const core::Tensor x = test::random_tensor(plan.own.shape(), core::DType::F64, seed + 2 * rank);
    const core::Tensor y = test::random_tensor(plan.need.shape(), core::DType::F64, seed + 2 * rank + 1);
    nn::HaloExchange fwd(plan, &world, alloc);
    fwd.start_forward(x);
    const core::Tensor ex = fwd.finish_forward();
    nn::HaloExchange bwd(plan, &world, alloc);
    bwd.start_backward(y);
    const core::Tensor ety = bwd.finish_backward();
    const double a = test::dot(test::to_doubles(ex), test::to_doubles(y));
    const double b = test::dot(test::to_doubles(x), test::to_doubles(ety));
    std::lock_guard<std::mutex> lock(mu);
    sums.ex_y += a;
    sums.x_ety += b;
  });
  return sums;
}

}  // namespace

TEST_CASE("halo exchange backward is the adjoint of the forward", "[nn][halo][adjoint]") {
  using core::DeviceMesh;
  struct Case {
    DeviceMesh mesh;
    std::vector<core::Placement> placements;
  };
  const Case meshes[] = {
      {DeviceMesh({3}, {"sp"}), {core::Shard(3)}},
      {DeviceMesh({4}, {"sp"}), {core::Shard(2)}},
      {DeviceMesh({7}, {"sp"}), {core::Shard(3)}},  // halos wider than shards: multi-hop
      {DeviceMesh({2, 3}, {"sp_h", "sp_w"}), {core::Shard(2), core::Shard(3)}},  // corners
      {DeviceMesh({2, 2}, {"dp", "sp"}), {core::Shard(0), core::Shard(2)}},
  };
  const nn::ConvSpec specs[] = {
      nn::ConvSpec::square(3, 3, 7, 1, 3, 1, 3),  // ConvNeXt depthwise
      nn::ConvSpec::square(3, 4, 3, 2, 1),        // strided: left and right halos differ
      nn::ConvSpec::square(3, 4, 7, 2, 3),
      nn::ConvSpec::square(3, 2, 5, 1, 4, 2),     // dilated
  };
  std::uint64_t seed = 1;
  for (const auto& m : meshes)
    for (const auto& spec : specs) {
      const core::Layout in(m.mesh, {2, 3, 15, 17}, m.placements);
      INFO(spec.describe() << " on " << in.to_string());
      const AdjointSums s = adjoint_sums(spec, in, seed += 100);
      REQUIRE(s.ex_y != 0.0);
      REQUIRE_THAT(s.x_ety, WithinRel(s.ex_y, 1e-12));
    }
}

TEST_CASE("the adjoint test detects a wrong backward", "[nn][halo][adjoint]") {
  // A forward gather whose backward dropped the halo gradients would fail the identity; emulate
  // it by comparing against the own-part-only inner product, which must differ when halos exist.
  const core::Layout in(core::DeviceMesh({3}, {"sp"}), {1, 2, 9, 12}, {core::Shard(3)});
  const nn::ConvSpec spec = nn::ConvSpec::square(2, 2, 3, 1, 1);
  const core::Layout out = nn::conv_output_layout(spec, in);
  double full = 0, own_only = 0;
  std::mutex mu;
  comm::local::run(3, [&](comm::Backend& world) {
    auto alloc = std::make_shared<core::Allocator>();
    const nn::HaloPlan plan = nn::make_halo_plan(spec, in, out, world.rank());
    const core::Tensor x = test::random_tensor(plan.own.shape(), core::DType::F64, 10 + world.rank());
    const core::Tensor y = test::random_tensor(plan.need.shape(), core::DType::F64, 20 + world.rank());
    nn::HaloExchange ex(plan, &world, alloc);
    ex.start_forward(x);
    const core::Tensor buf = ex.finish_forward();
    const auto yv = test::to_doubles(y);
    const double a = test::dot(test::to_doubles(buf), yv);
    // ⟨x, y restricted to own⟩: what a backward without the exchange would give.
    core::Tensor yown = y;
    const nn::Box mine = plan.need.intersect(plan.own);
    for (int d = 0; d < 4; ++d) yown = yown.narrow(d, mine.r[d].begin - plan.need.r[d].begin, mine.r[d].size());
    core::Tensor xown = x;
    for (int d = 0; d < 4; ++d) xown = xown.narrow(d, mine.r[d].begin - plan.own.r[d].begin, mine.r[d].size());
    const double b = test::dot(test::to_doubles(xown), test::to_doubles(yown));
    std::lock_guard<std::mutex> lock(mu);
    full += a;
    own_only += b;
  });
  REQUIRE(std::abs(full - own_only) > 1e-6 * std::abs(full));
}
