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

// Float32 sharded runs are held to the float32 rule (module_harness.hpp: within 16x as far from
// the float64 one-rank run as the float32 one-rank run is); float64 sharded runs equal the float64
// one-rank run to 1e-12 (tensor-scaled).
struct Refs {
  ModuleRun one32, one64;
};
Refs refs_of(const std::function<nn::ModulePtr()>& make, const core::Shape& s, const std::vector<double>& x,
             const std::vector<double>& dy) {
  return {run_module(make, test::unsharded(s), x, dy), run_module(make, test::unsharded(s), x, dy, 7, 0, core::DType::F64)};
}

void require_same(const std::function<nn::ModulePtr()>& make, const MeshCase& mc, const core::Shape& s,
                  const std::vector<double>& x, const std::vector<double>& dy, const Refs& refs) {
  const core::Layout in(mc.mesh, s, mc.placements);
  test::require_fp32_same(run_module(make, in, x, dy), refs.one32, refs.one64);
  const ModuleRun r64 = run_module(make, in, x, dy, 7, 0, core::DType::F64);
  REQUIRE_CLOSE(r64.y, refs.one64.y, 1e-12);
  REQUIRE_CLOSE(r64.dx, refs.one64.dx, 1e-12);
  REQUIRE(r64.grads_agree);
  for (std::size_t i = 0; i < r64.grads.size(); ++i) REQUIRE_CLOSE(r64.grads[i], refs.one64.grads[i], 1e-12);
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
  const Refs refs = refs_of(make, s, x, dy);
  // The float64 layer is the textbook BatchNorm; the float32 one is within float32's reach of it.
  const BnRef ref = batchnorm_ref(x, dy, s, 1e-5);
  REQUIRE_CLOSE(refs.one64.y, ref.y, 1e-12);
  REQUIRE_CLOSE(refs.one64.dx, ref.dx, 1e-12);
  REQUIRE(refs.one64.grads.size() == 2);
  REQUIRE_CLOSE(refs.one64.grads[0], ref.dgamma, 1e-12);
  REQUIRE_CLOSE(refs.one64.grads[1], ref.dbeta, 1e-12);
  REQUIRE_CLOSE(refs.one32.y, ref.y, 1e-5);
  REQUIRE_CLOSE(refs.one32.dx, ref.dx, 1e-4);
  for (const MeshCase& mc : mesh_cases()) {
    SECTION(mc.name) { require_same(make, mc, s, x, dy, refs); }
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
  const Refs refs = refs_of(make, s, x, dy);
  REQUIRE(refs.one64.y_shape == core::Shape{2, 3});
  REQUIRE_CLOSE(refs.one64.y, ref, 1e-12);
  REQUIRE_CLOSE(refs.one64.dx, dref, 1e-12);
  for (const MeshCase& mc : mesh_cases()) {
    SECTION(mc.name) { require_same(make, mc, s, x, dy, refs); }
  }
}

TEST_CASE("squeeze-and-excitation sharded equals unsharded, weights' gradients included", "[nn][layers]") {
  const core::Shape s{2, 8, 6, 10};
  const auto x = test::random_doubles(static_cast<std::size_t>(core::shape_numel(s)), 31);
  const auto dy = test::random_doubles(x.size(), 32);
  auto make = [] { return std::make_unique<nn::SqueezeExcite>("se", 8, 4); };
  const Refs refs = refs_of(make, s, x, dy);
  REQUIRE(refs.one64.grads.size() == 4);  // fc1 weight and bias, fc2 weight and bias
  double gsum = 0;
  for (const auto& g : refs.one64.grads)
    for (double v : g) gsum += std::abs(v);
  REQUIRE(gsum > 0);
  for (const MeshCase& mc : mesh_cases()) {
    SECTION(mc.name) { require_same(make, mc, s, x, dy, refs); }
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
  const Refs refs = refs_of(make, s, x, dy);
  for (const MeshCase& mc : mesh_cases()) {
    SECTION(mc.name) { require_same(make, mc, s, x, dy, refs); }
  }
}
