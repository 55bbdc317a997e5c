// The comm conformance suite, written once against a "world runner" and instantiated per backend
// with TESSERA_COMM_CONFORMANCE (UCX's per-transport tests, ggml's test-backend-ops).
//
// Ranks may be threads (local) or processes (ucx, later), so the checks share no memory between
// ranks: every rank derives its own and its peers' inputs from deterministic seeds, computes the
// expected result itself, and throws CheckFailure on a mismatch. Catch2 assertions run only on the
// main thread, on what the runner returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "support/catch.hpp"
#include "tessera/comm/backend.hpp"
#include "tessera/core/error.hpp"

namespace tessera::test::conformance {

/// The body one rank runs.
using RankFn = std::function<void(comm::Backend&)>;

/// How to run `size` ranks of one backend: `run` calls `fn` once per rank with that rank's
/// world backend, waits for all, and rethrows the first (root-cause) failure. `timeout` is the
/// deadline of every blocking wait.
struct ConformanceTarget {
  std::string name;
  std::function<void(int size, std::chrono::milliseconds timeout, const RankFn& fn)> run;
  /// True when reductions combine in rank order, so results must match the serial rank-order
  /// reference bit for bit; false accepts the rounding of another order (ring, tree).
  bool rank_order_reductions = true;
};

/// Thrown inside a rank when a check fails; the runner carries it to the main thread.
class CheckFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Deadline for checks that expect no waiting: generous, so only a hang reaches it.
inline constexpr std::chrono::milliseconds kTimeout{10'000};
/// Deadline for the checks that expect a timeout.
inline constexpr std::chrono::milliseconds kShortTimeout{200};

/// Runs `fn` on `size` ranks of `target`; returns "" on success, else a one-line description of
/// the root-cause failure (for REQUIRE(... == "") to print).
std::string run_ranks(const ConformanceTarget& target, int size, const RankFn& fn,
                      std::chrono::milliseconds timeout = kTimeout);

/// "" when `text` contains `part`, else a line quoting both (for REQUIRE(... == "") to print).
inline std::string missing_from(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return "";
  return "'" + part + "' is missing from: " + text;
}

/// "rank 1/3: <message>" thrown as CheckFailure.
template <class... Args>
[[noreturn]] void fail(const comm::Backend& b, const Args&... args) {
  throw CheckFailure(detail::cat("rank ", b.rank(), "/", b.size(), ": ", args...));
}

/// splitmix64: the mixing step of every seeded value in the suite.
constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Element i of rank `rank`'s input for `seed`: uniform in [-1, 1) for floats, an integer in
/// [-1000, 1000] otherwise (small enough that sums of a few ranks never overflow).
template <class T>
T input_value(std::uint64_t seed, int rank, std::size_t i) noexcept {
  const std::uint64_t h = mix(mix(seed) ^ mix(static_cast<std::uint64_t>(rank) + 0x51ull) ^ i);
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(static_cast<double>(h >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  } else {
    return static_cast<T>(static_cast<std::int64_t>(h % 2001) - 1000);
  }
}

/// Rank `rank`'s input of `count` elements for `seed`.
template <class T>
std::vector<T> inputs(std::uint64_t seed, int rank, std::size_t count) {
  std::vector<T> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = input_value<T>(seed, rank, i);
  return v;
}

/// A seed for one case of one check (so cases do not share data).
inline std::uint64_t case_seed(std::uint64_t check, std::uint64_t a = 0, std::uint64_t b = 0,
                               std::uint64_t c = 0) {
  return mix(mix(mix(check) ^ a) ^ (b << 20)) ^ c;
}

/// One step of the serial reference: a ⊕ b (Avg sums; the division comes at the end).
template <class T>
T combine(comm::ReduceOp op, T a, T b) noexcept {
  switch (op) {
    case comm::ReduceOp::Sum:
    case comm::ReduceOp::Avg:
      return static_cast<T>(a + b);
    case comm::ReduceOp::Max:
      return b > a ? b : a;
    case comm::ReduceOp::Min:
      return b < a ? b : a;
  }
  return a;
}

/// Serial rank-order reference: element i of the reduction over ranks 0..size-1 of
/// inputs(seed, r, offset + count)[offset + i], in the element type T.
template <class T>
std::vector<T> reference_reduce(comm::ReduceOp op, std::uint64_t seed, int size, std::size_t offset,
                                std::size_t count) {
  std::vector<T> acc(count);
  for (std::size_t i = 0; i < count; ++i) acc[i] = input_value<T>(seed, 0, offset + i);
  for (int r = 1; r < size; ++r)
    for (std::size_t i = 0; i < count; ++i)
      acc[i] = combine(op, acc[i], input_value<T>(seed, r, offset + i));
  if (op == comm::ReduceOp::Avg)
    for (auto& x : acc) x = static_cast<T>(x / static_cast<T>(size));
  return acc;
}

/// Throws CheckFailure naming `what` and the first differing element unless `actual` equals
/// `expected` (exactly, or for floats within rounding when `exact` is false).
template <class T>
void expect_equal(const comm::Backend& b, const std::vector<T>& actual,
                  const std::vector<T>& expected, const std::string& what, bool exact = true) {
  if (actual.size() != expected.size())
    fail(b, what, ": ", actual.size(), " elements, expected ", expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    bool ok = actual[i] == expected[i];
    if (!ok && !exact && std::is_floating_point_v<T>) {
      const double tol =
          (sizeof(T) == 4 ? 1e-5 : 1e-12) * (1.0 + (expected[i] < 0 ? -expected[i] : expected[i]));
      const double d = static_cast<double>(actual[i]) - static_cast<double>(expected[i]);
      ok = (d < 0 ? -d : d) <= tol;
    }
    if (!ok) {
      std::ostringstream os;
      os << std::setprecision(17) << what << ": element " << i << " of " << actual.size() << " is "
         << actual[i] << ", expected " << expected[i];
      fail(b, os.str());
    }
  }
}

/// Calls f.template operator()<T>() for T in float, double, int32, int64.
template <class F>
void for_each_dtype(F&& f) {
  f.template operator()<float>();
  f.template operator()<double>();
  f.template operator()<std::int32_t>();
  f.template operator()<std::int64_t>();
}

/// A BufferView of a vector (null data for an empty vector is fine).
template <class T>
comm::BufferView view(std::vector<T>& v) {
  return {v.data(), v.size(), core::dtype_of<T>, comm::MemorySpace::Host};
}

/// "f32 sum count 7" style labels for messages.
std::string label(core::DType dtype, std::size_t count);
std::string label(core::DType dtype, comm::ReduceOp op, std::size_t count);

/// Reductions checked everywhere.
inline constexpr comm::ReduceOp kAllOps[] = {comm::ReduceOp::Sum, comm::ReduceOp::Avg,
                                             comm::ReduceOp::Max, comm::ReduceOp::Min};
/// Element counts checked everywhere (kLargeCount additionally for a few cases).
inline constexpr std::size_t kCounts[] = {0, 1, 7, 1024};
inline constexpr std::size_t kLargeCount = (std::size_t{1} << 18) + 3;  // uneven blocks at 2, 3, 4 ranks

// The checks. Each runs `size` ranks of `target` and REQUIREs success.
void check_all_reduce(const ConformanceTarget& target, int size);
void check_all_gather(const ConformanceTarget& target, int size);
void check_reduce_scatter(const ConformanceTarget& target, int size);
void check_broadcast(const ConformanceTarget& target, int size);
void check_all_to_all(const ConformanceTarget& target, int size);
void check_barrier(const ConformanceTarget& target, int size);
void check_mixed_sequence(const ConformanceTarget& target, int size);
void check_p2p_ring(const ConformanceTarget& target, int size);
void check_p2p_neighbours(const ConformanceTarget& target, int size);
void check_p2p_self(const ConformanceTarget& target, int size);
void check_p2p_tags(const ConformanceTarget& target, int size);
void check_p2p_order_across_batches(const ConformanceTarget& target, int size);
void check_p2p_is_completed(const ConformanceTarget& target);
void check_p2p_size_mismatch(const ConformanceTarget& target);
void check_split_subgroups(const ConformanceTarget& target, int size);
void check_split_nested(const ConformanceTarget& target);
void check_collective_timeout(const ConformanceTarget& target);
void check_p2p_timeout(const ConformanceTarget& target);
void check_rank_failure(const ConformanceTarget& target, int size);
void check_mismatched_collectives(const ConformanceTarget& target, int size);
void check_invalid_arguments(const ConformanceTarget& target, int size);
// Progress while the caller computes (conformance_async_test.cpp; backends that claim
// Capabilities::overlaps_compute).
void check_overlapped_all_reduce(const ConformanceTarget& target, int size);
void check_overlapped_p2p(const ConformanceTarget& target, int size);

// bf16/f16 (conformance_half_test.cpp).
/// Rank `rank`'s bf16/f16 input (dtype dt), elements [offset, offset + count) for `seed`: a
/// magnitude in [2^-6, 2^7) (never zero, never subnormal) with a random sign, rounded to dt.
std::vector<std::uint16_t> half_inputs(core::DType dt, std::uint64_t seed, int rank,
                                       std::size_t offset, std::size_t count);
/// Throws CheckFailure naming `what` unless `actual` (16-bit patterns of dt) is the reduction `op`
/// over `size` ranks of half_inputs(dt, seed, r, offset, actual.size()): Max/Min the chosen input's
/// bits; Sum/Avg within the bound of f32 accumulation and one final rounding of the float64 sum of
/// the exact inputs — |err| ≤ γ_{n−1}·Σ|x_i| + u·|s32| + η, γ_k = k·2^-24/(1 − k·2^-24), u =
/// unit_roundoff(dt) (bf16 2^-8, f16 2^-11), η the subnormal floor (f16 2^-25, bf16 2^-126); Avg
/// adds the f32 division, e/n + 2^-24·|s32/n|. With `rank_order`, also bit for bit the rank-order
/// f32 sum (then / n in f32) rounded once.
void expect_half_reduction(const comm::Backend& b, core::DType dt, comm::ReduceOp op,
                           const std::vector<std::uint16_t>& actual, std::uint64_t seed, int size,
                           std::size_t offset, bool rank_order, const std::string& what);
void check_half_copies(const ConformanceTarget& target, int size);
void check_half_all_reduce(const ConformanceTarget& target, int size);
void check_half_reduce_scatter(const ConformanceTarget& target, int size);
void check_f16_overflow(const ConformanceTarget& target, int size);

}  // namespace tessera::test::conformance

/// Instantiates every conformance check as a TEST_CASE tagged `tags` (e.g. "[local]"), for the
/// ConformanceTarget expression `target`. `backend` (a string literal) keeps the titles unique
/// when several backends are compiled in (Catch2 rejects duplicate titles).
#define TESSERA_COMM_CONFORMANCE(target, backend, tags)                                            \
  TESSERA_CONFORMANCE_SIZES_(all_reduce, "all_reduce equals the serial rank-order reduction",      \
                             target, backend, tags)                                                \
  TESSERA_CONFORMANCE_SIZES_(all_gather, "all_gather places block r from rank r", target, backend, \
                             tags)                                                                 \
  TESSERA_CONFORMANCE_SIZES_(reduce_scatter, "reduce_scatter gives rank r the reduced block r",    \
                             target, backend, tags)                                                \
  TESSERA_CONFORMANCE_SIZES_(broadcast, "broadcast copies the root's buffer from every root",      \
                             target, backend, tags)                                                \
  TESSERA_CONFORMANCE_SIZES_(all_to_all, "all_to_all transposes the blocks", target, backend,      \
                             tags)                                                                 \
  TESSERA_CONFORMANCE_SIZES_(barrier, "barrier holds every rank until the last arrives", target,   \
                             backend, tags)                                                        \
  TESSERA_CONFORMANCE_SIZES_(mixed_sequence, "long mixed sequences of collectives stay in step",   \
                             target, backend, tags)                                                \
  TESSERA_CONFORMANCE_SIZES_(p2p_ring, "batch_p2p ring exchange", target, backend, tags)           \
  TESSERA_CONFORMANCE_SIZES_(p2p_neighbours, "batch_p2p exchanges both neighbours in one batch",   \
                             target, backend, tags)                                                \
  TESSERA_CONFORMANCE_SIZES_(p2p_self, "batch_p2p sends to itself", target, backend, tags)         \
  TESSERA_CONFORMANCE_SIZES_(p2p_tags, "batch_p2p matches by tag, in order per tag", target,       \
                             backend, tags)                                                        \
  TESSERA_CONFORMANCE_SIZES_(p2p_order_across_batches,                                             \
                             "batch_p2p matches receives in posting order across batches", target, \
                             backend, tags)                                                        \
  TESSERA_CONFORMANCE_SIZES_(split_subgroups, "split sub-groups run collectives and p2p", target,  \
                             backend, tags)                                                        \
  TESSERA_CONFORMANCE_SIZES_(rank_failure, "a failing rank releases the others", target, backend,  \
                             tags)                                                                 \
  TESSERA_CONFORMANCE_SIZES_(mismatched_collectives,                                               \
                             "mismatched collectives throw InternalError instead of hanging",      \
                             target, backend, tags)                                                \
  TESSERA_CONFORMANCE_SIZES_(invalid_arguments, "wrong counts throw InvalidArgument", target,      \
                             backend, tags)                                                        \
  TESSERA_CONFORMANCE_SIZES_(overlapped_all_reduce,                                                \
                             "a posted all_reduce completes while the caller computes", target,    \
                             backend, tags)                                                        \
  TESSERA_CONFORMANCE_SIZES_(overlapped_p2p,                                                       \
                             "a posted batch_p2p completes while the caller computes", target,     \
                             backend, tags)                                                        \
  TESSERA_CONFORMANCE_SIZES_(half_copies, "bf16/f16 p2p, broadcast, all_gather move the bits",     \
                             target, backend, tags)                                                \
  TESSERA_CONFORMANCE_SIZES_(half_all_reduce, "bf16/f16 all_reduce sums in f32, rounds once",      \
                             target, backend, tags)                                                \
  TESSERA_CONFORMANCE_SIZES_(half_reduce_scatter,                                                  \
                             "bf16/f16 reduce_scatter sums in f32, rounds once", target, backend,  \
                             tags)                                                                 \
  TESSERA_CONFORMANCE_SIZES_(f16_overflow, "f16 sums past 65504 give inf but f32 partials do not", \
                             target, backend, tags)                                                \
  TESSERA_CONFORMANCE_ONCE_(p2p_is_completed, "batch_p2p is_completed does not block", target,     \
                            backend, tags)                                                         \
  TESSERA_CONFORMANCE_ONCE_(p2p_size_mismatch, "batch_p2p size mismatch is InvalidArgument",       \
                            target, backend, tags)                                                 \
  TESSERA_CONFORMANCE_ONCE_(split_nested, "split of a split", target, backend, tags)               \
  TESSERA_CONFORMANCE_ONCE_(collective_timeout,                                                    \
                            "a skipped collective times out naming the missing rank", target,      \
                            backend, tags)                                                         \
  TESSERA_CONFORMANCE_ONCE_(p2p_timeout, "a receive without a send times out naming the peer",     \
                            target, backend, tags)

/// One TEST_CASE running check_<check>(target, size) for group sizes 1, 2, 3 and 4.
#define TESSERA_CONFORMANCE_SIZES_(check, title, target, backend, tags)        \
  TEST_CASE(title " (" backend ")", "[comm][conformance]" tags) {              \
    ::tessera::test::conformance::check_##check(target, GENERATE(1, 2, 3, 4)); \
  }
/// One TEST_CASE running check_<check>(target) (the check picks its own sizes).
#define TESSERA_CONFORMANCE_ONCE_(check, title, target, backend, tags) \
  TEST_CASE(title " (" backend ")", "[comm][conformance]" tags) {      \
    ::tessera::test::conformance::check_##check(target);               \
  }
