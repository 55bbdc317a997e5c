// Conformance cases of top-k gradient compression's three ops, against the sort-based float64
// reference of tests/support/reference/ops_ref.hpp. Every value is a multiple of 1/64 below 2^5 and
// the scales are powers of two, so every sum and product is exact in f32 and f64: the bound is 0,
// and the chosen indices are the reference's exactly. The selection's values are small integers,
// so the cut falls inside a class of equal magnitudes (of either sign) and the tie rule (the lower
// index) decides which are sent. f32 and f64 calls only (the op table's Index slots have no 16-bit
// width); contiguous vectors (their contract).
#include <cmath>
#include <cstring>

#include "compute/conformance/conformance.hpp"

namespace tessera::test::compute_conformance {
namespace {

using compute::OpKind;

/// n multiples of 1/64 in [-4, 4] (exact in every float dtype of the suite's f32/f64 calls).
Vec grid(std::size_t n, std::uint64_t seed) {
  Vec v = random_doubles(n, seed, -256, 256);
  for (double& x : v) x = std::round(x) / 64;
  return v;
}

std::int64_t bits_of(double v, DType dt) {
  if (dt == DType::F32) {
    const float f = static_cast<float>(v);
    std::int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i;
  }
  std::int64_t i;
  std::memcpy(&i, &v, sizeof i);
  return i;
}

double value_of(std::int64_t slot, DType dt) {
  if (dt == DType::F32) {
    const auto i = static_cast<std::int32_t>(slot);
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
  }
  double d;
  std::memcpy(&d, &slot, sizeof d);
  return d;
}

std::int64_t flat_n(const Variant& v) { return std::int64_t(v.n()) * v.dim(7) * v.w(33); }

void run_topk_select(Ctx& ctx) {
  const std::int64_t n = flat_n(ctx.variant), k = std::max<std::int64_t>(1, n / 10);
  // Small integers: |acc| takes 17 values over the bucket, so the k-th largest is tied with
  // entries on both sides of the cut, and which of them are sent is the tie rule's to decide.
  Vec g = random_doubles(std::size_t(n), 201, -8.5, 8.5), r = random_doubles(std::size_t(n), 202, -1, 1);
  for (double& x : g) x = std::round(x);
  for (double& x : r) x = std::round(x * 2) / 4;  // -0.5 ... 0.5 in quarters
  const double scale = 4;
  Vec acc(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) acc[i] = g[i] + scale * r[i];
  const std::vector<std::int64_t> want = ref::topk_indices(acc, k);
  const Tensor tg = ctx.input(g, {n}), tr = ctx.input(r, {n});
  Tensor tacc = ctx.output({n}), order = ctx.index_output(n), pairs = ctx.index_output(2 * k);
  compute::topk_select(ctx.backend, tg, tr, scale, k, tacc, order, pairs);
  ctx.expect_within("acc", tacc, acc, Vec(acc.size(), 0.0));
  const std::vector<std::int64_t> got = ctx.read_slots(pairs);
  for (std::int64_t j = 0; j < k; ++j) {
    if (got[std::size_t(j)] != want[std::size_t(j)])
      throw CheckFailure(detail::cat("pairs: index slot ", j, " holds ", got[std::size_t(j)], ", the reference's is ",
                                     want[std::size_t(j)], " (k = ", k, " of n = ", n, ")"));
    const double v = value_of(got[std::size_t(k + j)], ctx.dtype), w = acc[std::size_t(want[std::size_t(j)])];
    if (v != w)
      throw CheckFailure(detail::cat("pairs: value slot ", j, " holds ", v, ", acc[", want[std::size_t(j)], "] is ", w));
  }
}

void run_topk_scatter_add(Ctx& ctx) {
  const std::int64_t n = flat_n(ctx.variant), k = std::max<std::int64_t>(1, n / 7);
  const int ranks = 3;
  std::vector<std::vector<std::int64_t>> indices;
  std::vector<Vec> values;
  std::vector<std::int64_t> recv;
  for (int q = 0; q < ranks; ++q) {
    // Each rank's k indices: the top k of its own random vector (distinct, ascending), overlapping
    // the others' (the sums then add 2 or 3 values at an index).
    indices.push_back(ref::topk_indices(grid(std::size_t(n), 210 + q), k));
    values.push_back(grid(std::size_t(k), 220 + q));
    for (std::int64_t i : indices.back()) recv.push_back(i);
    for (double v : values.back()) recv.push_back(bits_of(v, ctx.dtype));
  }
  const Vec want = ref::topk_scatter_add(indices, values, std::size_t(n));
  const Tensor trecv = ctx.index_input(recv);
  Tensor grad = ctx.output({n});
  compute::topk_scatter_add(ctx.backend, trecv, k, grad);
  ctx.expect_within("grad", grad, want, Vec(want.size(), 0.0));
}

void run_topk_residual(Ctx& ctx) {
  const std::int64_t n = flat_n(ctx.variant), k = std::max<std::int64_t>(1, n / 5);
  const Vec acc0 = grid(std::size_t(n), 230);
  const std::vector<std::int64_t> sent_idx = ref::topk_indices(grid(std::size_t(n), 231), k);
  std::vector<std::int64_t> sent = sent_idx;
  for (std::int64_t j = 0; j < k; ++j) sent.push_back(bits_of(1.0 + double(j), ctx.dtype));  // values: unread
  const double inv_scale = 0.25;
  Vec want_acc = acc0;
  for (std::int64_t i : sent_idx) want_acc[std::size_t(i)] = 0;
  Vec want_r(want_acc.size());
  for (std::size_t i = 0; i < want_r.size(); ++i) want_r[i] = want_acc[i] * inv_scale;
  const Tensor tsent = ctx.index_input(sent);
  Tensor acc = ctx.output({n}, acc0), residual = ctx.output({n});
  compute::topk_residual(ctx.backend, tsent, inv_scale, acc, residual);
  ctx.expect_within("acc", acc, want_acc, Vec(want_acc.size(), 0.0));
  ctx.expect_within("residual", residual, want_r, Vec(want_r.size(), 0.0));
}

}  // namespace

std::vector<OpCase> topk_cases() {
  const Traits flat{.strided = false, .empty_batch = false, .empty_width = false};
  return {
      {OpKind::TopKSelect, flat, run_topk_select},
      {OpKind::TopKScatterAdd, flat, run_topk_scatter_add},
      {OpKind::TopKResidual, flat, run_topk_residual},
  };
}

}  // namespace tessera::test::compute_conformance
