// The halo exchange adjoint identity ⟨E x, y⟩ = ⟨x, Eᵀ y⟩ (float64), over in-process ranks whose
// tensors live in the memory an allocator factory gives (host, emulated device, a GPU), and the
// meshes and convolutions it is checked on. Used by halo_adjoint_test.cpp and tests/gpu.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include "support/test_utils.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/nn/halo_exchange.hpp"

namespace tessera::test {

struct AdjointSums {
  double ex_y = 0;   // Σ_r ⟨(E x)_r, y_r⟩
  double x_ety = 0;  // Σ_r ⟨x_r, (Eᵀ y)_r⟩
};

/// One allocator per rank: the memory the exchanged tensors live in.
using AllocatorFactory = std::function<core::AllocatorPtr(int rank)>;
inline core::AllocatorPtr host_allocator(int) { return std::make_shared<core::Allocator>(); }

inline AdjointSums adjoint_sums(const nn::ConvSpec& spec, const core::Layout& in, std::uint64_t seed,
                                const AllocatorFactory& make_alloc = host_allocator) {
  const core::Layout out = nn::conv_output_layout(spec, in);
  AdjointSums sums;
  std::mutex mu;
  comm::local::run(in.mesh().size(), [&](comm::Backend& world) {
    const int rank = world.rank();
    auto alloc = make_alloc(rank);
    const nn::HaloPlan plan = nn::make_halo_plan(spec, in, out, rank);
    const core::Tensor x = test::random_tensor(plan.own.shape(), core::DType::F64, seed + 2 * rank)
                               .to(alloc, core::MemCategory::Activation);
    const core::Tensor y = test::random_tensor(plan.need.shape(), core::DType::F64, seed + 2 * rank + 1)
                               .to(alloc, core::MemCategory::Activation);
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

/// Checks the identity to 1e-12 on every mesh (uneven shards, multi-hop halos, 2-D tiles with
/// corners, dp × sp) and convolution (depthwise 7×7, strided, dilated) of the suite.
inline void check_halo_adjoint(const AllocatorFactory& make_alloc = host_allocator) {

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
      const AdjointSums s = adjoint_sums(spec, in, seed += 100, make_alloc);
      REQUIRE(s.ex_y != 0.0);
      REQUIRE_THAT(s.x_ety, WithinRel(s.ex_y, 1e-12));
    }
}

}  // namespace tessera::test
