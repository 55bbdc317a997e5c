// Conformance suite, part 6: progress while the caller computes (Capabilities::overlaps_compute).
// A backend that claims it must move a posted operation's data while its caller runs code that
// never enters the backend: the post returns before the peers arrive, and one is_completed() after
// the computation, with no wait() before it, sees the operation complete.
#include <atomic>
#include <cmath>
#include <thread>

#include "comm/conformance.hpp"

namespace tessera::test::conformance {
namespace {

using Clock = std::chrono::steady_clock;

/// The peers arrive this late; a post must return well before it (a post that runs the
/// operation whole waits this long for them).
constexpr auto kLate = std::chrono::milliseconds(500);
/// The caller's computation after its post: long enough for the operation to finish many times
/// over on a loaded machine.
constexpr auto kCompute = std::chrono::milliseconds(1000);

/// Arithmetic for `d`, touching nothing but a local value (no backend call, no sleep: a rank that
/// sleeps would leave its core to a progress thread, and the check is about computing).
double compute_for(Clock::duration d) {
  const auto until = Clock::now() + d;
  double x = 1.0;
  while (Clock::now() < until)
    for (int i = 0; i < 10000; ++i) x = std::sqrt(x + 1.0);
  return x;
}

long long ms(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

/// Rank 0's part: post, then compute, then ask once. `what` names the operation.
void post_then_compute(comm::Backend& b, const std::function<comm::WorkPtr()>& post,
                       const char* what) {
  const auto t0 = Clock::now();
  comm::WorkPtr work = post();
  const auto posted = Clock::now() - t0;
  if (posted >= kLate / 2)
    fail(b, what, ": the post took ", ms(posted), " ms while the peers arrived after ", ms(kLate),
         " ms: it waited for them instead of returning");
  volatile double sink = compute_for(kCompute);
  (void)sink;
  if (!work->is_completed())
    fail(b, what, ": not complete after ", ms(kCompute), " ms of computing past the post (",
         "the peers posted after ", ms(kLate), " ms): its data did not move while the caller "
         "computed");
  work->wait();
}

}  // namespace

void check_overlapped_all_reduce(const ConformanceTarget& target, int size) {
  if (size < 2) return;  // one rank completes at the post
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    if (!b.capabilities().overlaps_compute) return;  // checked where it is claimed
    // Past every backend's direct-round threshold: rings and halving run in steps.
    const std::size_t count = kLargeCount;
    const auto seed = case_seed(60, 0, 0, count);
    std::vector<float> buf = inputs<float>(seed, b.rank(), count);
    if (b.rank() == 0) {
      post_then_compute(b, [&] { return b.all_reduce(view(buf), comm::ReduceOp::Sum); },
                        "all_reduce");
    } else {
      std::this_thread::sleep_for(kLate);
      b.all_reduce(view(buf), comm::ReduceOp::Sum)->wait();
    }
    expect_equal(b, buf, reference_reduce<float>(comm::ReduceOp::Sum, seed, b.size(), 0, count),
                 "overlapped all_reduce", target.rank_order_reductions);
  });
  REQUIRE(err == "");
}

void check_overlapped_p2p(const ConformanceTarget& target, int size) {
  if (size < 2) return;
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    if (!b.capabilities().overlaps_compute) return;
    // 1 MiB: above the ucx eager limit (256 KiB), so a rendezvous that needs both sides to run.
    const std::size_t count = std::size_t{1} << 18;
    const int n = b.size(), next = (b.rank() + 1) % n, prev = (b.rank() + n - 1) % n;
    std::vector<float> out(count), in(count, -1.0f);
    for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<float>(b.rank() * 1000003 + i);
    std::vector<comm::P2POp> ops = {{comm::P2POp::Kind::Recv, view(in), prev, 5},
                                    {comm::P2POp::Kind::Send, view(out), next, 5}};
    if (b.rank() == 0) {
      post_then_compute(b, [&] { return b.batch_p2p(ops); }, "batch_p2p ring");
    } else {
      std::this_thread::sleep_for(kLate);
      b.batch_p2p(ops)->wait();
    }
    for (std::size_t i = 0; i < count; ++i)
      if (in[i] != static_cast<float>(prev * 1000003 + i))
        fail(b, "overlapped batch_p2p: element ", i, " is ", in[i], ", expected ",
             static_cast<float>(prev * 1000003 + i));
  });
  REQUIRE(err == "");
}

}  // namespace tessera::test::conformance
