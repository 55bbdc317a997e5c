// Conformance suite, part 4: nothing hangs. Deadlines expire with a useful message, a failing
// rank releases the others, mismatched collectives and wrong arguments throw.
#include <chrono>
#include <thread>

#include "comm/conformance.hpp"

namespace tessera::test::conformance {
namespace {

using Clock = std::chrono::steady_clock;

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

/// Throws CheckFailure unless `message` contains every one of `parts`.
void expect_mentions(const comm::Backend& b, const std::string& message,
                     std::initializer_list<std::string> parts, const std::string& what) {
  for (const auto& p : parts)
    if (message.find(p) == std::string::npos) fail(b, what, ": message lacks '", p, "': ", message);
}

/// A rank's deliberate failure, thrown by check_rank_failure.
class DeliberateFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace

void check_collective_timeout(const ConformanceTarget& target) {
  // Rank 2 of 3 skips the all_reduce; ranks 0 and 1 must get TimeoutError naming the op and
  // rank 2, within 3x the deadline.
  const auto timeout = kShortTimeout;
  auto err = run_ranks(
      target, 3,
      [&](comm::Backend& b) {
        if (b.rank() == 2) return;
        std::vector<float> buf(4, 1.0f);
        const auto t0 = Clock::now();
        try {
          b.all_reduce(view(buf), comm::ReduceOp::Sum)->wait();
        } catch (const TimeoutError& e) {
          const auto elapsed = ms_since(t0);
          expect_mentions(b, e.what(), {"all_reduce", "rank 2"}, "collective timeout");
          if (elapsed > 3 * timeout.count() || elapsed < timeout.count() / 2)
            fail(b, "timed out after ", elapsed, " ms for a ", timeout.count(), " ms deadline");
          return;
        }
        fail(b, "all_reduce without rank 2 did not throw TimeoutError");
      },
      timeout);
  REQUIRE(err == "");
}

void check_p2p_timeout(const ConformanceTarget& target) {
  const auto timeout = kShortTimeout;
  auto err = run_ranks(
      target, 2,
      [&](comm::Backend& b) {
        if (b.rank() == 0) return;  // never sends
        std::vector<double> buf(3);
        const auto t0 = Clock::now();
        try {
          b.batch_p2p({{comm::P2POp::Kind::Recv, view(buf), 0, 9}})->wait();
        } catch (const TimeoutError& e) {
          const auto elapsed = ms_since(t0);
          expect_mentions(b, e.what(), {"batch_p2p", "rank 0", "tag 9"}, "p2p timeout");
          if (elapsed > 3 * timeout.count() || elapsed < timeout.count() / 2)
            fail(b, "timed out after ", elapsed, " ms for a ", timeout.count(), " ms deadline");
          return;
        }
        fail(b, "a receive that no one sends did not throw TimeoutError");
      },
      timeout);
  REQUIRE(err == "");
}

void check_rank_failure(const ConformanceTarget& target, int size) {
  // The last rank throws after one good collective; the others block in the next one. The run
  // must end long before the deadline (the others are released, not timed out) and rethrow the
  // root cause, not a secondary "aborted" error.
  const int failing = size - 1;
  const auto t0 = Clock::now();
  std::string rethrown;
  try {
    target.run(size, kTimeout, [&](comm::Backend& b) {
      std::vector<std::int32_t> x = {b.rank()};
      b.all_reduce(view(x), comm::ReduceOp::Sum)->wait();
      if (b.rank() == failing)
        throw DeliberateFailure(detail::cat("deliberate failure on rank ", failing));
      b.all_reduce(view(x), comm::ReduceOp::Sum)->wait();
    });
  } catch (const std::exception& e) {
    rethrown = e.what();
  }
  const auto elapsed_ms = ms_since(t0);
  REQUIRE(missing_from(rethrown, detail::cat("deliberate failure on rank ", failing)) == "");
  REQUIRE(elapsed_ms < kTimeout.count() / 4);
}

void check_mismatched_collectives(const ConformanceTarget& target, int size) {
  if (size < 2) return;  // one rank cannot disagree with itself
  auto expect_internal = [&](const char* what, const std::function<void(comm::Backend&)>& call,
                             std::initializer_list<std::string> parts) {
    const auto t0 = Clock::now();
    auto err = run_ranks(target, size, [&](comm::Backend& b) {
      try {
        call(b);
      } catch (const InternalError& e) {
        expect_mentions(b, e.what(), parts, what);
        return;
      }
      fail(b, what, " did not throw InternalError");
    });
    REQUIRE(err == "");
    const auto elapsed_ms = ms_since(t0);
    REQUIRE(elapsed_ms < kTimeout.count() / 4);  // detected, not timed out
  };
  expect_internal("all_gather on rank 0 vs all_reduce elsewhere",
                  [](comm::Backend& b) {
                    std::vector<float> one(1), all(static_cast<std::size_t>(b.size()));
                    if (b.rank() == 0)
                      b.all_gather(view(one), view(all))->wait();
                    else
                      b.all_reduce(view(one), comm::ReduceOp::Sum)->wait();
                  },
                  {"all_gather", "all_reduce", "rank 0"});
  expect_internal("all_reduce of 7 on rank 0 vs 8 elsewhere",
                  [](comm::Backend& b) {
                    std::vector<float> buf(b.rank() == 0 ? 7 : 8);
                    b.all_reduce(view(buf), comm::ReduceOp::Sum)->wait();
                  },
                  {"all_reduce", "7", "8"});
  expect_internal("broadcast roots disagree",
                  [](comm::Backend& b) {
                    std::vector<double> buf(2);
                    b.broadcast(view(buf), b.rank() == 0 ? 0 : 1)->wait();
                  },
                  {"broadcast", "root 0", "root 1"});
}

void check_invalid_arguments(const ConformanceTarget& target, int size) {
  // Every rank makes the same wrong call, so nothing is communicated; the group must stay usable.
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    const auto n = static_cast<std::size_t>(b.size());
    auto expect_invalid = [&](const char* what, const std::function<void()>& call,
                              std::initializer_list<std::string> parts) {
      try {
        call();
      } catch (const InvalidArgument& e) {
        expect_mentions(b, e.what(), parts, what);
        return;
      }
      fail(b, what, " did not throw InvalidArgument");
    };
    std::vector<float> send(3), small(3 * n - 1), big(3 * n), wrong_a2a(n + 1), recv_a2a(n + 1);
    expect_invalid("all_gather into a short buffer", [&] { b.all_gather(view(send), view(small)); },
                   {"all_gather", std::to_string(3 * n - 1), std::to_string(3 * n)});
    expect_invalid("reduce_scatter from a short buffer",
                   [&] { b.reduce_scatter(view(small), view(send), comm::ReduceOp::Sum); },
                   {"reduce_scatter", std::to_string(3 * n - 1)});
    expect_invalid("broadcast from a root outside the group",
                   [&] { b.broadcast(view(send), b.size()); },
                   {"broadcast", std::to_string(b.size())});
    expect_invalid("batch_p2p to a peer outside the group",
                   [&] {
                     b.batch_p2p({{comm::P2POp::Kind::Send, view(send), b.size(), 0}});
                   },
                   {"batch_p2p", std::to_string(b.size())});
    if (b.capabilities().all_to_all && n > 1)
      expect_invalid("all_to_all of a count not divisible by size",
                     [&] { b.all_to_all(view(wrong_a2a), view(recv_a2a)); },
                     {"all_to_all", std::to_string(n + 1)});
    // Still in step: a real collective works.
    std::vector<std::int32_t> one = {1};
    b.all_reduce(view(one), comm::ReduceOp::Sum)->wait();
    if (one[0] != b.size()) fail(b, "all_reduce after the rejected calls gave ", one[0]);
    b.all_gather(view(send), view(big))->wait();
  });
  REQUIRE(err == "");
}

}  // namespace tessera::test::conformance
