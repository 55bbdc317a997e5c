// Sharded conv2d equals the unsharded float64 reference — output and every gradient — over the
// grid of kernels, strides, paddings, dilations, groups and meshes of issue 2.
#include <sstream>

#include "nn/sharded_harness.hpp"

using namespace tessera;
using core::DeviceMesh;
using core::Placement;
using test::MeshCase;

namespace {

struct ConvCase {
  int k, s, p, d, groups;
};

// k ∈ {1,3,5,7}, s ∈ {1,2}, p ∈ {0, k/2}, d ∈ {1,2}, groups ∈ {1, 2, C}.
std::vector<ConvCase> conv_grid() {
  std::vector<ConvCase> out;
  for (int k : {1, 3, 5, 7})
    for (int s : {1, 2})
      for (int p : {0, k / 2}) {
        for (int d : {1, 2})
          for (int g : {1, 2, 4}) out.push_back({k, s, p, d, g});
        if (k == 1) break;  // p ∈ {0, 0}: one padding value only
      }
  return out;
}

std::vector<MeshCase> mesh_grid() {
  std::vector<MeshCase> m;
  for (int n : {1, 2, 3, 4, 7})
    m.push_back({DeviceMesh({n}, {"sp"}), {core::Shard(3)}, "W x" + std::to_string(n)});
  for (int n : {2, 3, 4, 7})
    m.push_back({DeviceMesh({n}, {"sp"}), {core::Shard(2)}, "H x" + std::to_string(n)});
  m.push_back({DeviceMesh({2, 2}, {"sp_h", "sp_w"}), {core::Shard(2), core::Shard(3)}, "tiles 2x2"});
  m.push_back({DeviceMesh({2, 3}, {"sp_h", "sp_w"}), {core::Shard(2), core::Shard(3)}, "tiles 2x3"});
  m.push_back({DeviceMesh({2, 2}, {"dp", "sp"}), {core::Shard(0), core::Shard(3)}, "dp2 x W2"});
  return m;
}

struct Reference {
  nn::ConvSpec spec;
  core::Shape xshape;
  test::ref::Conv2d rc;
  std::vector<double> x, w, b, dy;
  std::vector<double> y;
  test::ref::Conv2dGrads grads;
};

Reference make_reference(const ConvCase& c, std::uint64_t seed) {
  const int N = 2, C = 4, H = 17, W = 19;
  const int cout = c.groups == C ? C : 6;
  Reference r;
  r.spec = nn::ConvSpec::square(C, cout, c.k, c.s, c.p, c.d, c.groups, true);
  r.xshape = {N, C, H, W};
  test::ref::Conv2d& rc = r.rc;
  rc.n = N; rc.cin = C; rc.h = H; rc.w = W; rc.cout = cout;
  rc.kh = rc.kw = c.k; rc.sh = rc.sw = c.s; rc.ph = rc.pw = c.p; rc.dh = rc.dw = c.d; rc.groups = c.groups;
  r.x = test::random_doubles(rc.x_size(), seed);
  r.w = test::random_doubles(rc.w_size(), seed + 1);
  r.b = test::random_doubles(cout, seed + 2);
  r.dy = test::random_doubles(rc.y_size(), seed + 3);
  r.y = test::ref::conv2d_forward(rc, r.x, r.w, r.b);
  r.grads = test::ref::conv2d_backward(rc, r.x, r.w, r.dy);
  return r;
}

// The tolerance comes from the arithmetic, element by element: each output and gradient element
// is a sum of m terms, and floating point in any summation order, blocking, vector width, with or
// without FMA, sharded (partial sums added across ranks) or not, stays within γ_{m+2}·Σ|terms| of
// the exact sum (u = 2^-24 for f32, 2^-53 for f64; +2 for rounding the inputs to that type; plus
// the float64 reference's own γ_m). So it holds on every CPU, and a missing, doubled or misplaced
// term (a halo bug) is about one |term| off, far above γ·Σ|terms| (~1e-5 of it at m = 200).
test::ref::Conv2dBounds bounds_of(const test::ref::Conv2d& rc, const std::vector<double>& x,
                                  const std::vector<double>& w, const std::vector<double>& b,
                                  const std::vector<double>& dy, core::DType dtype) {
  return test::ref::conv2d_bounds(rc, x, w, b, dy, [dtype](std::int64_t m) {
    return test::gamma_bound(dtype, m + 2) + test::gamma_bound(core::DType::F64, m);
  });
}

void require_within(const test::ShardedResult& got, const std::vector<double>& y, const test::ref::Conv2dGrads& g,
                    const test::ref::Conv2dBounds& bound) {
  INFO("output");
  REQUIRE_WITHIN(got.y, y, bound.y);
  INFO("input gradient");
  REQUIRE_WITHIN(got.dx, g.dx, bound.dx);
  INFO("weight gradient");
  REQUIRE_WITHIN(got.dw, g.dw, bound.dw);
  INFO("bias gradient");
  REQUIRE_WITHIN(got.db, g.db, bound.db);
}

void check_against_reference(const Reference& ref, const MeshCase& mc, core::DType dtype, bool overlap) {
  const auto got = test::run_sharded_conv(ref.spec, ref.xshape, ref.x, ref.w, ref.b, ref.dy, mc, dtype, overlap);
  require_within(got, ref.y, ref.grads, bounds_of(ref.rc, ref.x, ref.w, ref.b, ref.dy, dtype));
  REQUIRE(got.weight_grads_agree);
}

}  // namespace

TEST_CASE("sharded conv2d equals the unsharded reference over the whole grid (f32)", "[nn][halo][conv]") {
  const auto convs = conv_grid();
  const auto meshes = mesh_grid();
  REQUIRE(convs.size() == 84);
  std::uint64_t seed = 1000;
  for (const auto& c : convs) {
    const Reference ref = make_reference(c, seed += 10);
    for (const auto& mc : meshes) {
      INFO(ref.spec.describe() << " on " << mc.name);
      check_against_reference(ref, mc, core::DType::F32, true);
    }
  }
}

// The bound is tight enough to catch a single wrong halo value: one zeroed value per forward halo
// message, or the adjoint's halo gradients dropped, take the output or the input gradient out
// of it on every mesh that exchanges halos.
TEST_CASE("the rounding bound catches a broken halo exchange", "[nn][halo][conv]") {
  const Reference ref = make_reference({3, 1, 1, 1, 1}, 4242);
  const auto bound = bounds_of(ref.rc, ref.x, ref.w, ref.b, ref.dy, core::DType::F32);
  for (const auto& mc : mesh_grid()) {
    if (mc.mesh.size() == 1 || mc.name.rfind("dp", 0) == 0) continue;  // no halos to break
    INFO(ref.spec.describe() << " on " << mc.name);
    const auto one = test::run_sharded_conv(ref.spec, ref.xshape, ref.x, ref.w, ref.b, ref.dy, mc, core::DType::F32,
                                            true, {}, test::Fault::HaloOneValue);
    INFO("one forward halo value zeroed: output " << test::compare_within(one.y, ref.y, bound.y).report);
    REQUIRE_FALSE(test::compare_within(one.y, ref.y, bound.y).ok);
    const auto back = test::run_sharded_conv(ref.spec, ref.xshape, ref.x, ref.w, ref.b, ref.dy, mc, core::DType::F32,
                                             true, {}, test::Fault::HaloBackwardZero);
    INFO("adjoint halos dropped: input gradient " << test::compare_within(back.dx, ref.grads.dx, bound.dx).report);
    REQUIRE_FALSE(test::compare_within(back.dx, ref.grads.dx, bound.dx).ok);
  }
}

TEST_CASE("sharded conv2d without overlap gives the same answer", "[nn][halo][conv]") {
  const ConvCase cases[] = {{7, 1, 3, 1, 4}, {3, 2, 1, 1, 1}, {7, 2, 3, 2, 2}, {5, 1, 2, 2, 4}};
  std::uint64_t seed = 77;
  for (const auto& c : cases) {
    const Reference ref = make_reference(c, seed += 10);
    for (const auto& mc : mesh_grid()) {
      INFO(ref.spec.describe() << " on " << mc.name);
      check_against_reference(ref, mc, core::DType::F32, false);
    }
  }
}

// Overlap changes only when the halos travel (core/src/conv2d.cpp computes the same windows either
// way), so it must not change a bit: a halo read before it arrived, or a halo gradient sent before
// it was computed, would. Every fourth convolution of the grid, on every mesh.
TEST_CASE("sharded conv2d with overlap on and off gives the same bits, forward and backward", "[nn][halo][conv]") {
  const auto convs = conv_grid();
  std::uint64_t seed = 3000;
  for (std::size_t i = 0; i < convs.size(); i += 4) {
    const Reference ref = make_reference(convs[i], seed += 10);
    for (const auto& mc : mesh_grid()) {
      INFO(ref.spec.describe() << " on " << mc.name);
      const auto on = test::run_sharded_conv(ref.spec, ref.xshape, ref.x, ref.w, ref.b, ref.dy, mc,
                                             core::DType::F32, true);
      const auto off = test::run_sharded_conv(ref.spec, ref.xshape, ref.x, ref.w, ref.b, ref.dy, mc,
                                              core::DType::F32, false);
      REQUIRE(on.y == off.y);
      REQUIRE(on.dx == off.dx);
      REQUIRE(on.dw == off.dw);
      REQUIRE(on.db == off.db);
    }
  }
}

// In float64 the same bound is ~1e-13 of Σ|terms|: only the summation order differs.
TEST_CASE("sharded conv2d in float64 matches the reference within float64 rounding", "[nn][halo][conv]") {
  const ConvCase cases[] = {{7, 1, 3, 1, 4}, {3, 2, 1, 1, 1}, {7, 2, 3, 1, 1}, {5, 2, 2, 2, 2}};
  std::uint64_t seed = 5;
  for (const auto& c : cases) {
    const Reference ref = make_reference(c, seed += 10);
    for (const auto& mc : mesh_grid()) {
      INFO(ref.spec.describe() << " on " << mc.name);
      check_against_reference(ref, mc, core::DType::F64, true);
    }
  }
}

TEST_CASE("sharded conv2d with empty shards (more ranks than rows)", "[nn][halo][conv]") {
  // H=2 over 3 ranks leaves rank 2 with no rows; W=3 over 4 ranks leaves one without columns.
  for (auto [k, s, p] : {std::tuple{3, 1, 1}, std::tuple{1, 1, 0}, std::tuple{3, 2, 1}}) {
    const nn::ConvSpec spec = nn::ConvSpec::square(3, 2, k, s, p);
    const core::Shape xs{1, 3, 2, 3};
    test::ref::Conv2d rc;
    rc.n = 1; rc.cin = 3; rc.h = 2; rc.w = 3; rc.cout = 2; rc.kh = rc.kw = k; rc.sh = rc.sw = s; rc.ph = rc.pw = p;
    const auto x = test::random_doubles(rc.x_size(), 1), w = test::random_doubles(rc.w_size(), 2);
    const auto b = test::random_doubles(2, 3), dy = test::random_doubles(rc.y_size(), 4);
    const auto y = test::ref::conv2d_forward(rc, x, w, b);
    const auto g = test::ref::conv2d_backward(rc, x, w, dy);
    for (const MeshCase& mc : {MeshCase{DeviceMesh({3}, {"sp"}), {core::Shard(2)}, "H x3"},
                               MeshCase{DeviceMesh({4}, {"sp"}), {core::Shard(3)}, "W x4"}}) {
      INFO(spec.describe() << " on " << mc.name);
      const auto got = test::run_sharded_conv(spec, xs, x, w, b, dy, mc, core::DType::F64);
      require_within(got, y, g, bounds_of(rc, x, w, b, dy, core::DType::F64));
    }
  }
}

TEST_CASE("sharded conv2d with rectangular kernels and per-dimension strides", "[nn][halo][conv]") {
  nn::ConvSpec spec;
  spec.in_channels = 3; spec.out_channels = 5;
  spec.kernel_h = 3; spec.kernel_w = 5; spec.stride_h = 1; spec.stride_w = 2;
  spec.pad_h = 1; spec.pad_w = 2; spec.dilation_h = 2; spec.dilation_w = 1;
  const core::Shape xs{2, 3, 13, 23};
  test::ref::Conv2d rc;
  rc.n = 2; rc.cin = 3; rc.h = 13; rc.w = 23; rc.cout = 5; rc.kh = 3; rc.kw = 5; rc.sh = 1; rc.sw = 2;
  rc.ph = 1; rc.pw = 2; rc.dh = 2; rc.dw = 1;
  const auto x = test::random_doubles(rc.x_size(), 11), w = test::random_doubles(rc.w_size(), 12);
  const auto b = test::random_doubles(5, 13), dy = test::random_doubles(rc.y_size(), 14);
  const auto y = test::ref::conv2d_forward(rc, x, w, b);
  const auto g = test::ref::conv2d_backward(rc, x, w, dy);
  for (const auto& mc : mesh_grid()) {
    INFO(spec.describe() << " on " << mc.name);
    const auto got = test::run_sharded_conv(spec, xs, x, w, b, dy, mc, core::DType::F32);
    require_within(got, y, g, bounds_of(rc, x, w, b, dy, core::DType::F32));
  }
}

// Halo-aware recompute at the convolution: a forward that keeps its halos (Conv2dHalos::Keep)
// holds exactly the received slabs, booked as halo buffers; a replay from them sends and receives
// nothing and gives the forward's bits, output and saved input alike. Every third convolution of
// the grid, on every mesh.
TEST_CASE("sharded conv2d replays a forward from its kept halos: same bits and no exchange", "[nn][halo][conv]") {
  const auto convs = conv_grid();
  std::uint64_t seed = 5000;
  for (std::size_t i = 0; i < convs.size(); i += 3) {
    const Reference ref = make_reference(convs[i], seed += 10);
    for (const auto& mc : mesh_grid()) {
      INFO(ref.spec.describe() << " on " << mc.name);
      const core::Layout in(mc.mesh, ref.xshape, mc.placements);
      const core::Layout out = nn::conv_output_layout(ref.spec, in);
      std::mutex mu;
      std::vector<std::string> problems;
      comm::local::run(mc.mesh.size(), [&](comm::Backend& local_world) {
        const int rank = local_world.rank();
        auto state = std::make_shared<test::FaultState>();
        test::FaultyComm world(local_world, state);
        auto alloc = std::make_shared<core::Allocator>("rank" + std::to_string(rank));
        compute::cpu::CpuBackend cpu(1);
        const nn::RankContext ctx{&world, &cpu, alloc};
        const nn::HaloPlan plan = nn::make_halo_plan(ref.spec, in, out, rank, {});
        const core::Tensor x = test::slice_global(ref.x, ref.xshape, in.local_offset(rank), in.local_shape(rank),
                                                  core::DType::F32);
        const core::Tensor w = test::from_doubles(ref.w, ref.spec.weight_shape(), core::DType::F32);
        const core::Tensor b = ref.spec.bias ? test::from_doubles(ref.b, {ref.spec.out_channels}, core::DType::F32)
                                             : core::Tensor();
        auto problem = [&](const std::string& p) {
          std::lock_guard<std::mutex> lock(mu);
          problems.push_back("rank " + std::to_string(rank) + ": " + p);
        };
        nn::Conv2dHalos halos;  // Use::Keep
        nn::Conv2dSaved first, again;
        const core::Tensor y1 = nn::conv2d_forward(plan, ctx, x, w, &b, &first, {}, nullptr, &halos);
        std::size_t expect_bytes = 0;
        for (const nn::HaloPiece& p : plan.recvs) expect_bytes += std::size_t(core::shape_numel(p.box.shape())) * 4;
        std::size_t kept_bytes = 0;
        for (const core::Tensor& t : halos.pieces) kept_bytes += std::size_t(t.numel()) * core::dtype_size(t.dtype());
        const std::vector<double> x_ext1 = test::to_doubles(first.x_ext);
        first = {};  // what backward would keep; the kept halos stay
        const std::size_t booked = alloc->stats().current[int(core::MemCategory::HaloBuffer)];
        if (halos.pieces.size() != plan.recvs.size() || kept_bytes != expect_bytes || booked != expect_bytes)
          problem("kept " + std::to_string(halos.pieces.size()) + " halos of " + std::to_string(kept_bytes) +
                  " bytes, booked " + std::to_string(booked) + "; the plan receives " +
                  std::to_string(plan.recvs.size()) + " of " + std::to_string(expect_bytes));
        const long batches = state->halo_batches;
        halos.use = nn::Conv2dHalos::Use::Replay;
        const core::Tensor y2 = nn::conv2d_forward(plan, ctx, x, w, &b, &again, {}, nullptr, &halos);
        if (state->halo_batches != batches) problem("the replay exchanged halos");
        if (test::to_doubles(y2) != test::to_doubles(y1)) problem("the replay's output differs");
        if (test::to_doubles(again.x_ext) != x_ext1) problem("the replay's saved input differs");
        world.barrier();  // a rank that replays must not have left a neighbour's message unread
      });
      for (const std::string& p : problems) FAIL_CHECK(p);
      REQUIRE(problems.empty());
    }
  }
}
