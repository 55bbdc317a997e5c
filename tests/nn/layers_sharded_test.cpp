// The layers whose sharded form needs communication or global indices — SyncBN, global average
// pooling, squeeze-and-excitation, DropPath — run sharded over W (uneven), over dp × sp and
// over 2-D tiles, and give the one-rank answer; BN and pooling also match float64 references.
#include <cmath>

#include "module_harness.hpp"
#include "support/catch.hpp"
#include "tessera/nn/layers.hpp"

using namespace tessera;
using core::Shard;
using test::ModuleRun;
using test::run_module;

namespace {

struct MeshCase {
  const char* name;
  core::DeviceMesh mesh;
  std::vector<core::Placement> placements;
};

std::vector<MeshCase> mesh_cases() {
  return {
      {"sp=3 along W (uneven)", core::DeviceMesh({3}, {"sp"}), {Shard(3)}},
      {"sp=2 along H", core::DeviceMesh({2}, {"sp"}), {Shard(2)}},
      {"dp=2 x sp=2", core::DeviceMesh({2, 2}, {"dp", "sp"}), {Shard(0), Shard(3)}},
      {"sp_h=2 x sp_w=3 tiles", core::DeviceMesh({2, 3}, {"sp_h", "sp_w"}), {Shard(2), Shard(3)}},
  };
}

void require_same(const ModuleRun& a, const ModuleRun& ref, double rtol) {
  REQUIRE(a.y_shape == ref.y_shape);
  REQUIRE_CLOSE(a.y, ref.y, rtol);
  REQUIRE_CLOSE(a.dx, ref.dx, rtol);
  REQUIRE(a.grads.size() == ref.grads.size());
  REQUIRE(a.grads_agree);
  for (std::size_t i = 0; i < a.grads.size(); ++i) {
    INFO("gradient of " << ref.param_names[i]);
    REQUIRE_CLOSE(a.grads[i], ref.grads[i], rtol);
  }
}

// Plain BatchNorm in training mode over (N,H,W) per channel, gamma = 1, beta = 0 (the layer's
// initial values): output, input gradient, dgamma and dbeta in float64.
struct BnRef {
  std::vector<double> y, dx, dgamma, dbeta;
};
BnRef batchnorm_ref(const std::vector<double>& x, const std::vector<double>& dy, const core::Shape& s, double eps) {
  const std::int64_t N = s[0], C = s[1], HW = s[2] * s[3];
  const double M = static_cast<double>(N * HW);
  BnRef r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  r.dgamma.assign(C, 0);
  r.dbeta.assign(C, 0);
  for (std::int64_t c = 0; c < C; ++c) {
    auto at = [&](std::int64_t n, std::int64_t i) { return static_cast<std::size_t>((n * C + c) * HW + i); };
    double mean = 0, var = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) mean += x[at(n, i)];
    mean /= M;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) var += (x[at(n, i)] - mean) * (x[at(n, i)] - mean);
    var /= M;
    const double rstd = 1 / std::sqrt(var + eps);
    double sdy = 0, sdyx = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) {
        const double xh = (x[at(n, i)] - mean) * rstd;
        r.y[at(n, i)] = xh;
        sdy += dy[at(n, i)];
        sdyx += dy[at(n, i)] * xh;
      }
    r.dgamma[c] = sdyx;
    r.dbeta[c] = sdy;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) {
        const double xh = (x[at(n, i)] - mean) * rstd;
        r.dx[at(n, i)] = rstd / M * (M * dy[at(n, i)] - sdy - xh * sdyx);
      }
  }
  return r;
}

}  // namespace

TEST_CASE("SyncBN over dp and spatial shards equals BatchNorm over the whole batch", "[nn][layers]") {
  const core::Shape s{4, 5, 6, 10};
  auto x = test::random_doubles(static_cast<std::size_t>(core::shape_numel(s)), 11, -2, 3);
  const auto dy = test::random_doubles(x.size(), 12);
  auto make = [] { return std::make_unique<nn::BatchNorm>("bn", 5); };
  const ModuleRun one = run_module(make, test::unsharded(s), x, dy);
  const BnRef ref = batchnorm_ref(x, dy, s, 1e-5);
  REQUIRE_CLOSE(one.y, ref.y, 1e-5);
  REQUIRE_CLOSE(one.dx, ref.dx, 1e-4);
  REQUIRE(one.grads.size() == 2);
  REQUIRE_CLOSE(one.grads[0], ref.dgamma, 1e-5);
  REQUIRE_CLOSE(one.grads[1], ref.dbeta, 1e-5);
  for (const MeshCase& mc : mesh_cases()) {
    SECTION(mc.name) {
      const ModuleRun r = run_module(make, core::Layout(mc.mesh, s, mc.placements), x, dy);
      REQUIRE_CLOSE(r.y, ref.y, 1e-5);
      REQUIRE_CLOSE(r.dx, ref.dx, 1e-4);
      require_same(r, one, 1e-4);
    }
  }
}

TEST_CASE("global average pooling is a Partial sum over spatial shards", "[nn][layers]") {
  const core::Shape s{2, 3, 6, 10};
  const auto x = test::random_doubles(static_cast<std::size_t>(core::shape_numel(s)), 21);
  const auto dy = test::random_doubles(6, 22);
  std::vector<double> ref(6, 0.0), dref(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) ref[i / 60] += x[i] / 60;
  for (std::size_t i = 0; i < x.size(); ++i) dref[i] = dy[i / 60] / 60;
  auto make = [] { return std::make_unique<nn::GlobalAvgPool>("pool"); };
  for (const MeshCase& mc : mesh_cases()) {
    SECTION(mc.name) {
      const ModuleRun r = run_module(make, core::Layout(mc.mesh, s, mc.placements), x, dy);
      REQUIRE(r.y_shape == core::Shape{2, 3});
      REQUIRE_CLOSE(r.y, ref, 1e-6);
      REQUIRE_CLOSE(r.dx, dref, 1e-6);
    }
  }
}

TEST_CASE("squeeze-and-excitation sharded equals unsharded, weights' gradients included", "[nn][layers]") {
  const core::Shape s{2, 8, 6, 10};
  const auto x = test::random_doubles(static_cast<std::size_t>(core::shape_numel(s)), 31);
  const auto dy = test::random_doubles(x.size(), 32);
  auto make = [] { return std::make_unique<nn::SqueezeExcite>("se", 8, 4); };
  const ModuleRun one = run_module(make, test::unsharded(s), x, dy);
  REQUIRE(one.grads.size() == 4);  // fc1 weight and bias, fc2 weight and bias
  double gsum = 0;
  for (const auto& g : one.grads)
    for (double v : g) gsum += std::abs(v);
  REQUIRE(gsum > 0);
  for (const MeshCase& mc : mesh_cases()) {
    SECTION(mc.name) { require_same(run_module(make, core::Layout(mc.mesh, s, mc.placements), x, dy), one, 1e-5); }
  }
}

TEST_CASE("DropPath: every shard of a sample makes the same keep decision", "[nn][layers]") {
  const core::Shape s{16, 2, 4, 10};
  const auto x = test::random_doubles(static_cast<std::size_t>(core::shape_numel(s)), 41);
  auto make = [] { return std::make_unique<nn::DropPath>("blocks.3.drop_path", 0.5); };
  const std::int64_t step = 5;
  const ModuleRun one = run_module(make, test::unsharded(s), x, {}, 9, step);
  // The unsharded output itself: each sample zeroed or scaled by 2, as DropPath::keep says.
  int kept = 0;
  for (std::int64_t n = 0; n < 16; ++n) {
    const bool keep = nn::DropPath::keep(9, step, "blocks.3.drop_path", n, 0.5);
    kept += keep;
    for (std::int64_t i = 0; i < 80; ++i) {
      const std::size_t k = static_cast<std::size_t>(n * 80 + i);
      REQUIRE(one.y[k] == (keep ? 2 * static_cast<double>(static_cast<float>(x[k])) : 0.0));
      REQUIRE(one.dx[k] == (keep ? 2.0 : 0.0));
    }
  }
  REQUIRE(kept > 2);
  REQUIRE(kept < 14);
  for (const MeshCase& mc : mesh_cases()) {
    SECTION(mc.name) {
      const ModuleRun r = run_module(make, core::Layout(mc.mesh, s, mc.placements), x, {}, 9, step);
      REQUIRE(r.y == one.y);  // bit for bit: the decision never depends on the rank
      REQUIRE(r.dx == one.dx);
    }
  }
  // Another step or layer draws other decisions.
  int differ = 0;
  for (std::int64_t n = 0; n < 16; ++n)
    differ += nn::DropPath::keep(9, step, "blocks.3.drop_path", n, 0.5) !=
              nn::DropPath::keep(9, step + 1, "blocks.3.drop_path", n, 0.5);
  REQUIRE(differ > 0);
}

TEST_CASE("LayerNorm over channels and LayerScale are local per pixel", "[nn][layers]") {
  const core::Shape s{2, 6, 6, 10};
  const auto x = test::random_doubles(static_cast<std::size_t>(core::shape_numel(s)), 51);
  const auto dy = test::random_doubles(x.size(), 52);
  auto make = [] {
    auto seq = std::make_unique<nn::Sequential>("block");
    seq->add(std::make_unique<nn::LayerNorm>("norm", 6));
    seq->add(std::make_unique<nn::LayerScale>("gamma", 6, 0.5));
    return seq;
  };
  const ModuleRun one = run_module(make, test::unsharded(s), x, dy);
  for (const MeshCase& mc : mesh_cases()) {
    SECTION(mc.name) { require_same(run_module(make, core::Layout(mc.mesh, s, mc.placements), x, dy), one, 1e-5); }
  }
}
