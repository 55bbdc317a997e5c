// redistribute between every pair of layouts on a 1-d and a 2-d mesh, uneven shards included.
// Values are small integers, so every sum is exact and results are compared for equality.
#include <mutex>

#include "support/test_utils.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/comm/redistribute.hpp"

using namespace tessera;
using core::Layout;
using core::Placement;
using core::Tensor;

namespace {

// The global tensor: integers in [-50, 50].
std::vector<double> global_values(const core::Shape& shape) {
  auto v = test::random_doubles(static_cast<std::size_t>(core::shape_numel(shape)), 99, -50, 50);
  for (auto& x : v) x = std::round(x);
  return v;
}

// This rank's piece of the global tensor under `l`. Partial mesh dims: coordinate 0 holds
// value − (p−1)·k and the others k, with k a rank-dependent integer, so the sum is the value.
Tensor local_piece(const Layout& l, int rank, const std::vector<double>& g) {
  const auto& shape = l.global_shape();
  const auto off = l.local_offset(rank), ls = l.local_shape(rank);
  Tensor t = Tensor::zeros(ls, core::DType::F64);
  const auto coords = l.mesh().coords_of(rank);
  double* p = t.data<double>();
  std::int64_t i = 0;
  for (std::int64_t a = 0; a < ls[0]; ++a)
    for (std::int64_t b = 0; b < ls[1]; ++b)
      for (std::int64_t c = 0; c < ls[2]; ++c)
        for (std::int64_t d = 0; d < ls[3]; ++d, ++i) {
          double v = g[(((a + off[0]) * shape[1] + b + off[1]) * shape[2] + c + off[2]) * shape[3] + d + off[3]];
          for (int md = 0; md < l.mesh().ndim(); ++md) {
            if (!l.placement(md).is_partial()) continue;
            const double k = static_cast<double>((i + 3 * md) % 7 - 3);
            v = coords[md] == 0 ? v - (l.mesh().dim_size(md) - 1) * k : k;
          }
          p[i] = v;
        }
  return t;
}

void check_all_pairs(const core::DeviceMesh& mesh, const std::vector<std::vector<Placement>>& options,
                     const core::Shape& shape) {
  const auto g = global_values(shape);
  const Layout replicated = Layout::replicated(mesh, shape);
  for (const auto& pf : options)
    for (const auto& pt : options) {
      const Layout from(mesh, shape, pf), to(mesh, shape, pt);
      INFO(from.to_string() << "  ->  " << to.to_string());
      std::vector<std::string> failures;
      std::mutex mu;
      comm::local::run(mesh.size(), [&](comm::Backend& world) {
        comm::MeshComm mc(mesh, world);
        const int r = world.rank();
        const Tensor got = comm::redistribute(mc, local_piece(from, r, g), from, to);
        std::string why;
        if (got.shape() != to.local_shape(r)) why = "shape " + got.describe();
        if (why.empty() && !to.has_partial() && test::to_doubles(got) != test::to_doubles(local_piece(to, r, g)))
          why = "values";
        // Whatever the target, going on to Replicate must give back the global tensor.
        const Tensor full = comm::redistribute(mc, got, to, replicated);
        if (why.empty() && test::to_doubles(full) != g) why = "round trip to Replicate";
        if (!why.empty()) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back("rank " + std::to_string(r) + ": " + why);
        }
      });
      for (auto& f : failures) INFO(f);
      REQUIRE(failures.empty());
    }
}

}  // namespace

TEST_CASE("redistribute between all placements on a 1-d mesh of 3 (uneven)", "[comm][redistribute]") {
  const core::DeviceMesh mesh({3}, {"sp"});
  check_all_pairs(mesh,
                  {{core::Shard(0)}, {core::Shard(2)}, {core::Shard(3)}, {core::Replicate()}, {core::Partial()}},
                  {4, 2, 7, 5});
}

TEST_CASE("redistribute on a 2-d mesh, nested sharding included", "[comm][redistribute]") {
  const core::DeviceMesh mesh({2, 2}, {"dp", "sp"});
  check_all_pairs(mesh,
                  {{core::Shard(0), core::Shard(3)},
                   {core::Shard(2), core::Shard(3)},
                   {core::Shard(3), core::Shard(2)},
                   {core::Replicate(), core::Replicate()},
                   {core::Partial(), core::Replicate()},
                   {core::Replicate(), core::Partial()},
                   {core::Shard(3), core::Shard(3)},
                   {core::Partial(), core::Partial()},
                   {core::Shard(2), core::Partial()}},
                  {3, 2, 5, 7});
}

TEST_CASE("redistribute refuses mismatched layouts", "[comm][redistribute][errors]") {
  const core::DeviceMesh mesh({2}, {"sp"});
  std::string msg;
  comm::local::run(2, [&](comm::Backend& world) {
    comm::MeshComm mc(mesh, world);
    const Layout a(mesh, {2, 4}, {core::Shard(1)});
    const Layout b(mesh, {2, 6}, {core::Replicate()});
    try {
      comm::redistribute(mc, Tensor::zeros({2, 2}), a, b);
    } catch (const InvalidArgument& e) {
      if (world.rank() == 0) msg = e.what();
    }
  });
  REQUIRE_THAT(msg, Catch::Matchers::Contains("redistribute never reshapes"));
}
