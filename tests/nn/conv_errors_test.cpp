// Bad input to the sharded convolution: each gets its error type and a message that says what
// was wrong and how to fix it.
#include "support/test_utils.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/nn/conv2d.hpp"

using namespace tessera;
using Catch::Matchers::Contains;

namespace {
const core::DeviceMesh kMesh({2}, {"sp"});
}  // namespace

TEST_CASE("channel / group mismatch", "[nn][errors]") {
  const auto msg =
      test::error_of<InvalidArgument>([] { nn::ConvSpec::square(6, 4, 3, 1, 1, 1, 4).validate(); });
  REQUIRE_THAT(msg, Contains("6 input channels are not divisible by groups=4"));
  REQUIRE_THAT(msg, Contains("use a group count that divides"));
  const auto msg2 = test::error_of<InvalidArgument>([] {
    nn::ConvSpec::square(8, 8, 3).output_shape({1, 6, 10, 10});
  });
  REQUIRE_THAT(msg2, Contains("has 6 channels but the convolution expects 8"));
}

TEST_CASE("kernel larger than the padded input", "[nn][errors]") {
  const auto msg = test::error_of<InvalidArgument>([] {
    nn::ConvSpec::square(3, 3, 7, 1, 1, 2).output_shape({1, 3, 9, 40});
  });
  REQUIRE_THAT(msg, Contains("the kernel spans 13 rows but the padded input has only 11"));
  REQUIRE_THAT(msg, Contains("use a larger input or more padding"));
}

TEST_CASE("shard too thin for its halo when multi-hop halos are off", "[nn][errors]") {
  const core::Layout in(core::DeviceMesh({5}, {"sp"}), {1, 2, 8, 10}, {core::Shard(3)});
  const auto spec = nn::ConvSpec::square(2, 2, 7, 1, 3);
  nn::HaloOptions strict;
  strict.allow_wide = false;
  const auto msg = test::error_of<InvalidArgument>(
      [&] { nn::make_halo_plan(spec, in, nn::conv_output_layout(spec, in), 2, strict); });
  REQUIRE_THAT(msg, Contains("conv 7x7/s1/p3"));
  REQUIRE_THAT(msg, Contains("needs a halo of 3"));
  REQUIRE_THAT(msg, Contains("allow multi-hop halos"));
}

TEST_CASE("partial inputs, channel sharding and mismatched layouts", "[nn][errors]") {
  const auto spec = nn::ConvSpec::square(4, 4, 3, 1, 1);
  const core::Layout partial(kMesh, {1, 4, 8, 8}, {core::Partial()});
  const auto m1 =
      test::error_of<InvalidArgument>([&] { nn::make_halo_plan(spec, partial, partial, 0); });
  REQUIRE_THAT(m1, Contains("redistribute the Partial input"));
  const core::Layout chan(kMesh, {1, 4, 8, 8}, {core::Shard(1)});
  const auto m2 = test::error_of<Unsupported>([&] { nn::make_halo_plan(spec, chan, chan, 0); });
  REQUIRE_THAT(m2, Contains("sharding channels (Shard(1)) is not supported"));
  const core::Layout w(kMesh, {1, 4, 8, 8}, {core::Shard(3)});
  const core::Layout h(kMesh, {1, 4, 8, 8}, {core::Shard(2)});
  const auto m3 = test::error_of<InvalidArgument>([&] { nn::make_halo_plan(spec, w, h, 0); });
  REQUIRE_THAT(m3, Contains("a convolution keeps its input's placements"));
  const core::Layout wrong_shape(kMesh, {1, 4, 6, 6}, {core::Shard(3)});
  const auto m4 =
      test::error_of<InvalidArgument>([&] { nn::make_halo_plan(spec, w, wrong_shape, 0); });
  REQUIRE_THAT(m4, Contains("does not have the output shape [1,4,8,8]"));
}

TEST_CASE("wrong local input or weight shapes are refused before any communication", "[nn][errors]") {
  const auto spec = nn::ConvSpec::square(4, 4, 3, 1, 1);
  const core::Layout in(kMesh, {1, 4, 8, 8}, {core::Shard(3)});
  std::string m_input, m_weight;
  comm::local::run(2, [&](comm::Backend& world) {
    auto alloc = std::make_shared<core::Allocator>();
    compute::cpu::CpuBackend cpu;
    nn::RankContext ctx{&world, &cpu, alloc};
    const auto plan = nn::make_halo_plan(spec, in, nn::conv_output_layout(spec, in), world.rank());
    const core::Tensor w = core::Tensor::zeros(spec.weight_shape());
    const auto a = test::error_of<InvalidArgument>([&] {
      nn::conv2d_forward(plan, ctx, core::Tensor::zeros({1, 4, 8, 8}), w, nullptr, nullptr);
    });
    const auto b = test::error_of<InvalidArgument>([&] {
      nn::conv2d_forward(plan, ctx, core::Tensor::zeros(in.local_shape(world.rank())),
                         core::Tensor::zeros({4, 2, 3, 3}), nullptr, nullptr);
    });
    if (world.rank() == 0) {
      m_input = a;
      m_weight = b;
    }
  });
  REQUIRE_THAT(m_input, Contains("rank 0 got input f32[1,4,8,8] but its layout gives it [1,4,8,4]"));
  REQUIRE_THAT(m_weight, Contains("should have shape [4,4,3,3]"));
}

TEST_CASE("unknown backend names list what is available", "[nn][errors]") {
  comm::Registry comms;
  register_builtin_backends(comms);
  const auto m1 =
      test::error_of<InvalidArgument>([&] { comms.create("mpi", comm::BackendOptions{}); });
  REQUIRE_THAT(m1, Contains("no comm backend 'mpi'; available: local"));
  compute::Registry computes;
  register_builtin_backends(computes);
  const auto m2 =
      test::error_of<InvalidArgument>([&] { computes.create("tpu", compute::BackendOptions{}); });
  REQUIRE_THAT(m2, Contains("no compute backend 'tpu'; available: cpu"));
}
