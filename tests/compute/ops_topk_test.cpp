// Top-k compression's kernels on the cpu backend: a large bucket on 1 and 2 threads against the
// sort-based float64 reference (exact: the values are multiples of 1/64), a NaN chosen first, and
// the errors: a corrupted index refused before anything is written, k out of range, wrong slot
// dtypes, a 16-bit bucket.
#include <cmath>
#include <cstring>
#include <limits>

#include "ops_test_util.hpp"

namespace tessera::test::ops_test {
namespace {

using namespace tessera::compute;

Vec grid(std::size_t n, std::uint64_t seed) {
  Vec v = random_doubles(n, seed, -256, 256);
  for (double& x : v) x = std::round(x) / 64;
  return v;
}

DType slot_of(DType dt) { return dt == DType::F32 ? DType::I32 : DType::I64; }

std::int64_t slot_at(const Tensor& t, std::int64_t i) {
  return t.dtype() == DType::I32 ? t.data<std::int32_t>()[i] : t.data<std::int64_t>()[i];
}

double value_at(const Tensor& pairs, std::int64_t i) {
  if (pairs.dtype() == DType::I32) {
    float f;
    std::memcpy(&f, &pairs.data<std::int32_t>()[i], sizeof f);
    return f;
  }
  double d;
  std::memcpy(&d, &pairs.data<std::int64_t>()[i], sizeof d);
  return d;
}

TEST_CASE("topk_select, scatter_add and residual match the reference on a large bucket", "[ops][topk]") {
  const DType dt = GENERATE(DType::F32, DType::F64);
  const int threads = GENERATE(1, 2);
  INFO(core::dtype_name(dt) << ", " << threads << " thread(s)");
  CpuBackend be(threads);
  const std::int64_t n = 300001, k = 3001;
  const Vec g = grid(std::size_t(n), 301), r = grid(std::size_t(n), 302);
  Vec acc(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) acc[i] = g[i] + 2 * r[i];
  const std::vector<std::int64_t> want = ref::topk_indices(acc, k);

  Tensor tacc = Tensor::empty({n}, dt), order = Tensor::empty({n}, slot_of(dt)), pairs = Tensor::empty({2 * k}, slot_of(dt));
  topk_select(be, make(g, {n}, dt), make(r, {n}, dt), 2.0, k, tacc, order, pairs);
  REQUIRE(to_doubles(tacc) == acc);
  for (std::int64_t j = 0; j < k; ++j) {
    REQUIRE(slot_at(pairs, j) == want[std::size_t(j)]);
    REQUIRE(value_at(pairs, k + j) == acc[std::size_t(want[std::size_t(j)])]);
  }

  // Two ranks' pairs: this one's and the same again (every chosen entry doubled).
  Tensor recv = Tensor::empty({4 * k}, slot_of(dt));
  std::memcpy(recv.raw_data(), pairs.raw_data(), pairs.nbytes());
  std::memcpy(static_cast<char*>(recv.raw_data()) + pairs.nbytes(), pairs.raw_data(), pairs.nbytes());
  Tensor grad = Tensor::empty({n}, dt);
  topk_scatter_add(be, recv, k, grad);
  Vec vals(static_cast<std::size_t>(k));
  for (std::int64_t j = 0; j < k; ++j) vals[std::size_t(j)] = acc[std::size_t(want[std::size_t(j)])];
  REQUIRE(to_doubles(grad) == ref::topk_scatter_add({want, want}, {vals, vals}, std::size_t(n)));

  Tensor residual = Tensor::empty({n}, dt);
  topk_residual(be, pairs, 0.5, tacc, residual);
  Vec want_r = acc;
  for (std::int64_t i : want) want_r[std::size_t(i)] = 0;
  REQUIRE(to_doubles(tacc) == want_r);
  for (double& x : want_r) x *= 0.5;
  REQUIRE(to_doubles(residual) == want_r);
}

TEST_CASE("topk_select sends a NaN before every number", "[ops][topk]") {
  CpuBackend be(1);
  const Tensor g = make({1, -9, 3, 0, 2}, {5}, DType::F32), r = Tensor::zeros({5}, DType::F32);
  g.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  Tensor acc = Tensor::empty({5}, DType::F32), order = Tensor::empty({5}, DType::I32), pairs = Tensor::empty({4}, DType::I32);
  topk_select(be, g, r, 1.0, 2, acc, order, pairs);
  CHECK(slot_at(pairs, 0) == 1);  // |-9|, then the NaN at 3: ascending by index
  CHECK(slot_at(pairs, 1) == 3);
  CHECK(value_at(pairs, 2) == -9);
  CHECK(std::isnan(value_at(pairs, 3)));
}

TEST_CASE("top-k ops refuse corrupted pairs, bad k and wrong dtypes", "[ops][topk]") {
  CpuBackend be(1);
  const std::int64_t n = 8;
  Tensor grad = Tensor::zeros({n}, DType::F32);
  grad.data<float>()[0] = 7;
  Tensor recv = Tensor::zeros({4}, DType::I32);  // two blocks of k = 1
  recv.data<std::int32_t>()[2] = 8;             // block 1's index is outside the bucket
  REQUIRE_THROWS_WITH(topk_scatter_add(be, recv, 1, grad),
                      Catch::Contains("block 1") && Catch::Contains("index 8 outside the bucket of 8"));
  CHECK(grad.data<float>()[0] == 7);  // refused before anything is written
  REQUIRE_THROWS_WITH(topk_scatter_add(be, Tensor::zeros({3}, DType::I32), 1, grad),
                      Catch::Contains("not a whole number of blocks of 2k = 2"));

  const Tensor g = Tensor::zeros({n}, DType::F32), r = Tensor::zeros({n}, DType::F32);
  Tensor acc = Tensor::empty({n}, DType::F32), order = Tensor::empty({n}, DType::I32);
  Tensor pairs = Tensor::empty({2}, DType::I32);
  REQUIRE_THROWS_WITH(topk_select(be, g, r, 1.0, 0, acc, order, pairs), Catch::Contains("k = 0 must be in [1, 8]"));
  REQUIRE_THROWS_WITH(topk_select(be, g, r, 1.0, 2, acc, order, pairs), Catch::Contains("must have 2k = 4 slots"));
  Tensor wide = Tensor::empty({2}, DType::I64);
  REQUIRE_THROWS_WITH(topk_select(be, g, r, 1.0, 1, acc, order, wide),
                      Catch::Contains("pairs") && Catch::Contains("must be i32 in a call of f32"));
  const Tensor h = Tensor::zeros({n}, DType::BF16);
  Tensor hacc = Tensor::empty({n}, DType::BF16);
  REQUIRE_THROWS_WITH(topk_select(be, h, h, 1.0, 1, hacc, order, pairs),
                      Catch::Contains("neither f32 nor f64"));
  Tensor bad_sent = Tensor::zeros({2}, DType::I32);
  bad_sent.data<std::int32_t>()[0] = -1;
  Tensor res = Tensor::empty({n}, DType::F32);
  REQUIRE_THROWS_WITH(topk_residual(be, bad_sent, 1.0, acc, res), Catch::Contains("sent index -1 outside"));
}

}  // namespace
}  // namespace tessera::test::ops_test
