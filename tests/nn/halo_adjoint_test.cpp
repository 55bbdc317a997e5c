// The backward halo exchange is the exact adjoint of the forward: ⟨E x, y⟩ = ⟨x, Eᵀ y⟩ in float64.
#include <mutex>

#include "nn/halo_adjoint.hpp"
#include "support/emulated_device.hpp"
#include "support/test_utils.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/nn/halo_exchange.hpp"

using namespace tessera;

TEST_CASE("halo exchange backward is the adjoint of the forward", "[nn][halo][adjoint]") {
  test::check_halo_adjoint();
}

// Device buffers: copies through the device memory, exchanges staged by the local backend.
TEST_CASE("halo exchange on device buffers is the adjoint of the forward (emulated device)",
          "[nn][halo][adjoint][device]") {
  test::check_halo_adjoint(
      [](int) { return std::make_shared<core::Allocator>("rank", std::make_shared<test::EmulatedDeviceMemory>()); });
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
