// MeshComm's hierarchical all-reduce against its flat one and a float64 reference, on simulated
// nodes of local ranks (threads): 2 nodes × 2 ranks, uneven counts, Avg, Max, integers, bf16/f16,
// the 4×1 and 1×4 degenerate meshes, the phases' traced bytes, Auto's rule and bad options.
#include <cmath>
#include <cstring>
#include <functional>

#include "support/test_utils.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/core/half.hpp"
#include "tessera/core/tracing.hpp"

using namespace tessera;
using comm::AllReduceAlgorithm;
using comm::MeshCommOptions;
using comm::ReduceOp;
using core::DType;
using core::Tensor;

namespace {

const MeshCommOptions kFlat{.all_reduce = AllReduceAlgorithm::Flat};
const MeshCommOptions kHier{.all_reduce = AllReduceAlgorithm::Hierarchical};

/// Rank r's input: `count` values from seed 1000 + r, uniform in [lo, hi), rounded to integers
/// when `integers` (then every partial sum of a few ranks is exact in f32, and in bf16/f16 for
/// |values| ≤ 8), converted to `dtype` once.
Tensor input(int rank, std::size_t count, DType dtype, bool integers, double lo = -1, double hi = 1) {
  auto v = test::random_doubles(count, 1000 + rank, lo, hi);
  if (integers)
    for (double& x : v) x = std::round(x);
  return test::from_doubles(v, {static_cast<std::int64_t>(count)}, dtype);
}

std::vector<unsigned char> bits(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.raw_data());
  return std::vector<unsigned char>(p, p + t.nbytes());
}

/// Every rank's inputs, flat result and hierarchical result, and what the hierarchical MeshComm
/// chose for the call.
struct Run {
  std::vector<Tensor> in, flat, hier;
  std::vector<AllReduceAlgorithm> chosen;
};

/// Reduces `make(rank)` over `dims` of `mesh` once with a Flat MeshComm and once with one built
/// with `options`, on mesh.size() local ranks.
Run run_both(const core::DeviceMesh& mesh, const std::vector<int>& dims, const MeshCommOptions& options,
             ReduceOp op, const std::function<Tensor(int)>& make) {
  const int n = mesh.size();
  Run out{std::vector<Tensor>(n), std::vector<Tensor>(n), std::vector<Tensor>(n),
          std::vector<AllReduceAlgorithm>(n)};
  comm::local::run(n, [&](comm::Backend& world) {
    comm::MeshComm flat(mesh, world, kFlat);
    comm::MeshComm hier(mesh, world, options);
    const int r = world.rank();
    out.in[r] = make(r);
    Tensor a = out.in[r].clone(), b = out.in[r].clone();
    flat.all_reduce(a, dims, op);
    out.chosen[r] = hier.all_reduce_algorithm(b, dims);
    hier.all_reduce(b, dims, op);
    out.flat[r] = a;  // each thread writes its own element
    out.hier[r] = b;
  });
  return out;
}

/// Σ_r x_r (or the average) in float64 and Σ_r |x_r|, element by element.
void reference(const Run& run, bool avg, std::vector<double>& exact, std::vector<double>& abs_sum) {
  const std::size_t count = static_cast<std::size_t>(run.in[0].numel());
  exact.assign(count, 0);
  abs_sum.assign(count, 0);
  for (const Tensor& t : run.in) {
    const auto v = test::to_doubles(t);
    for (std::size_t i = 0; i < count; ++i) {
      exact[i] += v[i];
      abs_sum[i] += std::abs(v[i]);
    }
  }
  if (avg)
    for (double& x : exact) x /= static_cast<double>(run.in.size());
}

const core::DeviceMesh kTwoByTwo({2, 2}, {"node", "sp"});

}  // namespace

TEST_CASE("hierarchical all-reduce equals the flat one bit for bit on 2 nodes of 2 ranks", "[comm][local][hier]") {
  // Integer values in [-50, 50]: every partial sum is an exact f32 integer, so the flat order
  // ((x0+x1)+x2)+x3 and the hierarchical (x0+x1)+(x2+x3) give the same bits; Avg divides the
  // same exact sum by 4. Counts cover empty, fewer than the node's 2 ranks, odd and large.
  const std::size_t count = GENERATE(0, 1, 3, 8, 1001, 70'001);
  const ReduceOp op = GENERATE(ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min);
  INFO("count " << count << " op " << comm::reduce_op_name(op));
  const Run run = run_both(kTwoByTwo, {0, 1}, kHier, op,
                           [&](int r) { return input(r, count, DType::F32, true, -50, 50); });
  std::vector<double> exact, abs_sum;
  reference(run, op == ReduceOp::Avg, exact, abs_sum);
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    REQUIRE(run.chosen[r] == AllReduceAlgorithm::Hierarchical);
    REQUIRE(run.hier[r].shape() == run.in[r].shape());
    REQUIRE(bits(run.hier[r]) == bits(run.flat[r]));
    if (op == ReduceOp::Sum || op == ReduceOp::Avg) REQUIRE(test::to_doubles(run.hier[r]) == exact);
  }
}

TEST_CASE("hierarchical f32 sums stay within the two-level bound of the exact sum", "[comm][local][hier]") {
  // Each input passes through (L−1) + (H−1) = 2 additions: |hier − exact| ≤ γ_2·Σ|x|, while the
  // flat rank-order sum is within γ_3·Σ|x|. Avg adds one rounding of the quotient (u·|result|).
  const std::size_t count = GENERATE(5, 4096, 10'001);
  const ReduceOp op = GENERATE(ReduceOp::Sum, ReduceOp::Avg);
  INFO("count " << count << " op " << comm::reduce_op_name(op));
  const Run run = run_both(kTwoByTwo, {0, 1}, kHier, op,
                           [&](int r) { return input(r, count, DType::F32, false); });
  std::vector<double> exact, abs_sum;
  reference(run, op == ReduceOp::Avg, exact, abs_sum);
  const double scale = op == ReduceOp::Avg ? 0.25 : 1.0;
  const double u = std::ldexp(1.0, -24);
  std::vector<double> hier_bound(count), flat_bound(count);
  // Avg: the quotient of the computed sum is rounded once, u·|sum/4| ≤ u·(|exact| + sum error).
  auto bound = [&](int additions, std::size_t i) {
    const double sum_err = test::gamma_bound(DType::F32, additions) * abs_sum[i] * scale;
    return sum_err + (op == ReduceOp::Avg ? u * (std::abs(exact[i]) + sum_err) : 0);
  };
  for (std::size_t i = 0; i < count; ++i) {
    hier_bound[i] = bound(2, i);
    flat_bound[i] = bound(3, i);
  }
  std::vector<double> both(count);
  for (std::size_t i = 0; i < count; ++i) both[i] = hier_bound[i] + flat_bound[i];
  bool some_differ = false;
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    const auto h = test::to_doubles(run.hier[r]), f = test::to_doubles(run.flat[r]);
    REQUIRE_WITHIN(h, exact, hier_bound);
    REQUIRE_WITHIN(f, exact, flat_bound);
    REQUIRE_WITHIN(h, f, both);
    REQUIRE(bits(run.hier[r]) == bits(run.hier[0]));  // every rank holds the same bits
    some_differ = some_differ || h != f;
  }
  // The two orders really differ somewhere (else this test could not tell them apart).
  if (count > 100) REQUIRE(some_differ);
}

TEST_CASE("hierarchical all-reduce of 16-bit buffers rounds once from f32", "[comm][local][hier]") {
  const DType dt = GENERATE(DType::BF16, DType::F16);
  const ReduceOp op = GENERATE(ReduceOp::Sum, ReduceOp::Avg);
  INFO(core::dtype_name(dt) << " " << comm::reduce_op_name(op));
  SECTION("integers in [-8, 8]: the same bits as the flat reduction") {
    const Run run = run_both(kTwoByTwo, {0, 1}, kHier, op,
                             [&](int r) { return input(r, 999, dt, true, -8, 8); });
    std::vector<double> exact, abs_sum;
    reference(run, op == ReduceOp::Avg, exact, abs_sum);
    for (int r = 0; r < 4; ++r) {
      REQUIRE(bits(run.hier[r]) == bits(run.flat[r]));
      if (op == ReduceOp::Sum) REQUIRE(test::to_doubles(run.hier[r]) == exact);
    }
  }
  SECTION("random values: within γ_2·Σ|x| in f32 plus one 16-bit rounding") {
    const std::size_t count = 3001;
    const Run run = run_both(kTwoByTwo, {0, 1}, kHier, op,
                             [&](int r) { return input(r, count, dt, false); });
    std::vector<double> exact, abs_sum;
    reference(run, op == ReduceOp::Avg, exact, abs_sum);
    const double u16 = std::ldexp(1.0, dt == DType::BF16 ? -8 : -11), u = std::ldexp(1.0, -24);
    const double scale = op == ReduceOp::Avg ? 0.25 : 1.0;
    std::vector<double> bound(count);
    for (std::size_t i = 0; i < count; ++i) {
      const double f32_err = test::gamma_bound(DType::F32, 2) * abs_sum[i] * scale +
                             (op == ReduceOp::Avg ? u * (std::abs(exact[i]) + abs_sum[i]) : 0);
      bound[i] = f32_err + u16 * (std::abs(exact[i]) + f32_err);
    }
    for (int r = 0; r < 4; ++r) {
      REQUIRE_WITHIN(test::to_doubles(run.hier[r]), exact, bound);
      REQUIRE(bits(run.hier[r]) == bits(run.hier[0]));
    }
  }
}

TEST_CASE("hierarchical all-reduce of integers sums and averages exactly", "[comm][local][hier]") {
  const ReduceOp op = GENERATE(ReduceOp::Sum, ReduceOp::Avg);
  const Run run = run_both(kTwoByTwo, {0, 1}, kHier, op, [&](int r) {
    Tensor t = Tensor::empty({7}, DType::I32);
    for (int i = 0; i < 7; ++i) t.data<std::int32_t>()[i] = (r + 1) * (i - 3) * 1001 - r;
    return t;
  });
  for (int r = 0; r < 4; ++r) REQUIRE(bits(run.hier[r]) == bits(run.flat[r]));
  // Element 0: Σ_r (r+1)·(−3)·1001 − r = −30036; Avg truncates −7509 toward zero.
  REQUIRE(run.hier[0].data<std::int32_t>()[0] == (op == ReduceOp::Sum ? -30036 : -7509));
}

TEST_CASE("degenerate hierarchies: 4 nodes of 1 rank and 1 node of 4 ranks", "[comm][local][hier]") {
  // 4×1: the inter-node all-reduce is the whole reduction. 1×4: reduce-scatter and all-gather in
  // the node, which sum in the flat order. Random f32 values: the same bits as the flat reduction.
  const auto shape = GENERATE(std::vector<int>{4, 1}, std::vector<int>{1, 4});
  const std::size_t count = GENERATE(1, 6, 1003);
  const ReduceOp op = GENERATE(ReduceOp::Sum, ReduceOp::Avg);
  const core::DeviceMesh mesh(shape, {"node", "sp"});
  INFO(mesh.to_string() << " count " << count << " op " << comm::reduce_op_name(op));
  const Run run = run_both(mesh, {0, 1}, kHier, op, [&](int r) { return input(r, count, DType::F32, false); });
  for (int r = 0; r < 4; ++r) {
    REQUIRE(run.chosen[r] == AllReduceAlgorithm::Hierarchical);
    REQUIRE(bits(run.hier[r]) == bits(run.flat[r]));
  }
}

TEST_CASE("the node dimension can be any mesh dimension named by node_dim", "[comm][local][hier]") {
  // dp=2,sp=2 with node_dim "dp": nodes are the dp coordinates, as for a trainer on two hosts.
  const core::DeviceMesh mesh({2, 2}, {"dp", "sp"});
  const MeshCommOptions opt{.all_reduce = AllReduceAlgorithm::Hierarchical, .node_dim = "dp"};
  const Run run = run_both(mesh, {0, 1}, opt, ReduceOp::Sum,
                           [&](int r) { return input(r, 33, DType::F32, true, -50, 50); });
  for (int r = 0; r < 4; ++r) {
    REQUIRE(run.chosen[r] == AllReduceAlgorithm::Hierarchical);
    REQUIRE(bits(run.hier[r]) == bits(run.flat[r]));
  }
  // A reduction inside a node (sp only) never crosses nodes: flat even when forced.
  const Run inside = run_both(mesh, {1}, opt, ReduceOp::Sum, [&](int r) { return input(r, 9, DType::F32, false); });
  for (int r = 0; r < 4; ++r) {
    REQUIRE(inside.chosen[r] == AllReduceAlgorithm::Flat);
    REQUIRE(bits(inside.hier[r]) == bits(inside.flat[r]));
  }
}

TEST_CASE("hierarchical phases move the padded buffer and its shard as traced", "[comm][local][hier]") {
  // 2 nodes × 2 ranks, 1001 f32: padded to 1002, shards of 501. The traced buffers (nccl-tests
  // convention: reduce_scatter its input, all_reduce its buffer, all_gather its output).
  core::TraceRecorder rec;
  comm::local::run(4, [&](comm::Backend& world) {
    core::TracingComm traced(world, core::TraceTarget{&rec, world.rank(), kTwoByTwo.coords_of(world.rank())});
    comm::MeshComm mc(kTwoByTwo, traced, kHier);
    Tensor t = input(world.rank(), 1001, DType::F32, false);
    mc.all_reduce(t, {0, 1});
  });
  for (int r = 0; r < 4; ++r) {
    std::vector<std::pair<std::string, std::int64_t>> got;
    for (const auto& e : rec.events())
      if (e.pid == r && e.cat == "comm") got.emplace_back(e.op, e.bytes);
    const std::vector<std::pair<std::string, std::int64_t>> want{
        {"reduce_scatter", 1002 * 4}, {"all_reduce", 501 * 4}, {"all_gather", 1002 * 4}};
    INFO("rank " << r);
    REQUIRE(got == want);
  }
}

TEST_CASE("Auto chooses hierarchical by size and topology", "[comm][local][hier]") {
  using comm::choose_all_reduce_algorithm;
  comm::AllReduceShape s{.nodes = 2, .ranks_per_node = 8, .bytes = 1 << 20, .multi_process = true};
  REQUIRE(choose_all_reduce_algorithm(AllReduceAlgorithm::Auto, s) == AllReduceAlgorithm::Hierarchical);
  s.bytes = comm::kHierarchicalMaxBytes;
  REQUIRE(choose_all_reduce_algorithm(AllReduceAlgorithm::Auto, s) == AllReduceAlgorithm::Hierarchical);
  s.bytes = comm::kHierarchicalMaxBytes + 1;
  REQUIRE(choose_all_reduce_algorithm(AllReduceAlgorithm::Auto, s) == AllReduceAlgorithm::Flat);
  REQUIRE(choose_all_reduce_algorithm(AllReduceAlgorithm::Auto, s, std::size_t{64} << 20) ==
          AllReduceAlgorithm::Hierarchical);
  s.bytes = 4096;
  for (auto change : std::vector<std::function<void(comm::AllReduceShape&)>>{
           [](auto& x) { x.nodes = 1; }, [](auto& x) { x.ranks_per_node = 1; },
           [](auto& x) { x.multi_process = false; }, [](auto& x) { x.host_buffer = false; }}) {
    comm::AllReduceShape c = s;
    change(c);
    REQUIRE(choose_all_reduce_algorithm(AllReduceAlgorithm::Auto, c) == AllReduceAlgorithm::Flat);
    REQUIRE(choose_all_reduce_algorithm(AllReduceAlgorithm::Hierarchical, c) == AllReduceAlgorithm::Hierarchical);
    REQUIRE(choose_all_reduce_algorithm(AllReduceAlgorithm::Flat, s) == AllReduceAlgorithm::Flat);
  }
  // In-process local ranks share one memory: Auto stays flat on a mesh with a node dimension.
  const Run run = run_both(kTwoByTwo, {0, 1}, MeshCommOptions{}, ReduceOp::Sum,
                           [&](int r) { return input(r, 10, DType::F32, false); });
  for (int r = 0; r < 4; ++r) REQUIRE(run.chosen[r] == AllReduceAlgorithm::Flat);

  REQUIRE(comm::parse_all_reduce_algorithm("hier") == AllReduceAlgorithm::Hierarchical);
  REQUIRE(comm::parse_all_reduce_algorithm("hierarchical") == AllReduceAlgorithm::Hierarchical);
  REQUIRE(comm::parse_all_reduce_algorithm(comm::all_reduce_algorithm_name(AllReduceAlgorithm::Flat)) ==
          AllReduceAlgorithm::Flat);
  REQUIRE_THROWS_WITH(comm::parse_all_reduce_algorithm("ring"),
                      Catch::Matchers::Contains("\"ring\"") && Catch::Matchers::Contains("auto, flat or hier"));
}

TEST_CASE("bad hierarchical configurations are refused before any communication", "[comm][local][hier]") {
  auto error_of = [](const core::DeviceMesh& mesh, const MeshCommOptions& opt) -> std::string {
    try {
      comm::local::run(mesh.size(), [&](comm::Backend& world) { comm::MeshComm mc(mesh, world, opt); });
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  };
  const std::string missing = error_of(kTwoByTwo, {.all_reduce = AllReduceAlgorithm::Auto, .node_dim = "nodes"});
  INFO(missing);
  REQUIRE_THAT(missing, Catch::Matchers::Contains("node_dim 'nodes'") &&
                            Catch::Matchers::Contains("node=2,sp=2") && Catch::Matchers::Contains("node, sp"));
  const std::string none = error_of(core::DeviceMesh({2, 2}, {"dp", "sp"}), kHier);
  INFO(none);
  REQUIRE_THAT(none, Catch::Matchers::Contains("needs a node dimension") &&
                         Catch::Matchers::Contains("dp, sp") && Catch::Matchers::Contains("node_dim"));
  REQUIRE(error_of(core::DeviceMesh({2, 2}, {"dp", "sp"}), kFlat).empty());
}
