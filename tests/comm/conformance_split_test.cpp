// Conformance suite, part 3: split into sub-groups (halves, even/odd, reversed order, absent
// ranks, repeated and nested splits) and collectives and p2p on them.
#include <algorithm>
#include <memory>

#include "comm/conformance.hpp"

namespace tessera::test::conformance {
namespace {

/// Returns true (after checking that split throws Unsupported) when the backend cannot split.
bool split_unsupported(comm::Backend& b) {
  if (b.capabilities().split) return false;
  try {
    b.split({b.rank()});
  } catch (const Unsupported&) {
    return true;
  }
  fail(b, "capabilities().split is false but split did not throw Unsupported");
}

/// Runs collectives and a p2p ring on `sub`, whose members are the world ranks `members` (in
/// sub-group rank order), and checks the results. `world_rank` is this rank's world rank.
void exercise(comm::Backend& sub, const std::vector<int>& members, int world_rank,
              std::uint64_t seed, const std::string& what) {
  const int m = static_cast<int>(members.size());
  const auto it = std::find(members.begin(), members.end(), world_rank);
  if (sub.size() != m) fail(sub, what, ": size() is ", sub.size(), ", expected ", m);
  if (sub.rank() != static_cast<int>(it - members.begin()))
    fail(sub, what, ": rank() is ", sub.rank(), ", expected ", it - members.begin(),
         " (ranks are ordered as listed)");

  // Who is where: all_gather of world ranks gives the member list.
  std::vector<std::int32_t> me = {world_rank}, all(members.size());
  sub.all_gather(view(me), view(all))->wait();
  expect_equal(sub, all, std::vector<std::int32_t>(members.begin(), members.end()),
               what + ": all_gather of world ranks");

  // all_reduce in sub-group rank order over the members' inputs.
  std::vector<double> x = inputs<double>(seed, world_rank, 7);
  std::vector<double> expected = inputs<double>(seed, members[0], 7);
  for (int k = 1; k < m; ++k) {
    auto theirs = inputs<double>(seed, members[static_cast<std::size_t>(k)], 7);
    for (std::size_t i = 0; i < 7; ++i) expected[i] += theirs[i];
  }
  sub.all_reduce(view(x), comm::ReduceOp::Sum)->wait();
  expect_equal(sub, x, expected, what + ": all_reduce");

  // broadcast from the last sub-group rank.
  std::vector<std::int64_t> v = sub.rank() == m - 1 ? inputs<std::int64_t>(seed + 1, world_rank, 5)
                                                    : std::vector<std::int64_t>(5, 0);
  sub.broadcast(view(v), m - 1)->wait();
  expect_equal(sub, v, inputs<std::int64_t>(seed + 1, members.back(), 5), what + ": broadcast");

  // p2p ring in sub-group ranks.
  const int next = (sub.rank() + 1) % m, prev = (sub.rank() + m - 1) % m;
  std::vector<float> out = inputs<float>(seed + 2, world_rank, 9), in(9);
  sub.batch_p2p({{comm::P2POp::Kind::Send, view(out), next, 0},
                 {comm::P2POp::Kind::Recv, view(in), prev, 0}})
      ->wait();
  expect_equal(sub, in, inputs<float>(seed + 2, members[static_cast<std::size_t>(prev)], 9),
               what + ": p2p ring");
  sub.barrier();
}

/// One world all_reduce, to show the world group stays in step with sub-group traffic.
void world_step(comm::Backend& world, std::uint64_t seed) {
  std::vector<std::int64_t> x = inputs<std::int64_t>(seed, world.rank(), 3);
  world.all_reduce(view(x), comm::ReduceOp::Sum)->wait();
  expect_equal(world, x,
               reference_reduce<std::int64_t>(comm::ReduceOp::Sum, seed, world.size(), 0, 3),
               "world all_reduce between splits");
}

/// The members of the part of `parts` that contains `rank`.
std::vector<int> part_of(const std::vector<std::vector<int>>& parts, int rank) {
  for (const auto& p : parts)
    if (std::find(p.begin(), p.end(), rank) != p.end()) return p;
  return {};
}

}  // namespace

void check_split_subgroups(const ConformanceTarget& target, int size) {
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    if (split_unsupported(b)) return;
    const int n = b.size(), me = b.rank(), half = (n + 1) / 2;
    std::vector<int> lo, hi, even, odd, all_but_last;
    for (int r = 0; r < n; ++r) {
      (r < half ? lo : hi).push_back(r);
      (r % 2 == 0 ? even : odd).push_back(r);
      if (r < n - 1) all_but_last.push_back(r);
    }
    std::vector<int> lo_rev(lo.rbegin(), lo.rend()), hi_rev(hi.rbegin(), hi.rend());

    const std::vector<int> halves = part_of({lo, hi}, me);
    auto sub_halves = b.split(halves);
    if (!sub_halves) fail(b, "split into halves returned nullptr for a member");
    exercise(*sub_halves, halves, me, 100, "halves");
    world_step(b, 101);

    const std::vector<int> parity = part_of({even, odd}, me);
    auto sub_parity = b.split(parity);
    if (!sub_parity) fail(b, "even/odd split returned nullptr for a member");
    exercise(*sub_parity, parity, me, 200, "even/odd");
    exercise(*sub_halves, halves, me, 201, "halves again, after the even/odd split");
    world_step(b, 202);

    const std::vector<int> reversed = part_of({lo_rev, hi_rev}, me);
    auto sub_rev = b.split(reversed);
    if (!sub_rev) fail(b, "reversed split returned nullptr for a member");
    exercise(*sub_rev, reversed, me, 300, "reversed halves");

    // The same lists again make a distinct group; use the new one, then the old one.
    auto sub_halves2 = b.split(halves);
    if (!sub_halves2) fail(b, "repeated split returned nullptr for a member");
    exercise(*sub_halves2, halves, me, 400, "repeated halves");
    exercise(*sub_halves, halves, me, 401, "first halves after the repeated split");

    // The last rank is in no sub-group: it passes an empty list and gets nullptr.
    const bool absent = me == n - 1;
    auto sub_absent = b.split(absent ? std::vector<int>{} : all_but_last);
    if (absent && sub_absent) fail(b, "split returned a backend for a rank not in its list");
    if (!absent) {
      if (!sub_absent) fail(b, "split with an absent rank returned nullptr for a member");
      exercise(*sub_absent, all_but_last, me, 500, "all but the last rank");
    }
    world_step(b, 501);
  });
  REQUIRE(err == "");
}

void check_split_nested(const ConformanceTarget& target) {
  auto err = run_ranks(target, 4, [&](comm::Backend& b) {
    if (split_unsupported(b)) return;
    // World {0,1,2,3} -> {0,1,2} (rank 3 absent) -> {0,2} and {1} (sub-group ranks 0,2 and 1).
    auto first = b.split(b.rank() == 3 ? std::vector<int>{} : std::vector<int>{0, 1, 2});
    if (b.rank() == 3) {
      if (first) fail(b, "rank 3 is in no sub-group but got a backend");
    } else {
      if (!first) fail(b, "split returned nullptr for a member of {0, 1, 2}");
      exercise(*first, {0, 1, 2}, b.rank(), 600, "first-level split");
      const std::vector<int> nested =
          first->rank() == 1 ? std::vector<int>{1} : std::vector<int>{0, 2};
      auto second = first->split(nested);
      if (!second) fail(b, "nested split returned nullptr for a member");
      // Sub-group ranks {0, 2} of {0, 1, 2} are world ranks {0, 2}; {1} is world rank 1.
      const std::vector<int> members =
          first->rank() == 1 ? std::vector<int>{1} : std::vector<int>{0, 2};
      exercise(*second, members, b.rank(), 601, "nested split");
      exercise(*first, {0, 1, 2}, b.rank(), 602, "first-level split after nesting");
    }
    world_step(b, 603);
  });
  REQUIRE(err == "");
}

}  // namespace tessera::test::conformance
