// The conformance suite against the ucx plugin, every rank a separate process on loopback
// (tessera_tests_ucx; ctest label "ucx"), plus a latency figure for the 4 KiB all-reduce.
#include <cstdio>

#include "comm/conformance.hpp"
#include "comm/process_runner.hpp"

namespace tessera::test::conformance {

ConformanceTarget ucx_target() {
  return {"ucx",
          [](int size, std::chrono::milliseconds timeout, const RankFn& fn) {
            run_in_processes(TESSERA_UCX_PLUGIN, size, timeout, fn);
          },
          /*rank_order_reductions=*/false};  // large messages reduce along a ring
}

}  // namespace tessera::test::conformance

TESSERA_COMM_CONFORMANCE(::tessera::test::conformance::ucx_target(), "ucx", "[ucx]")

TEST_CASE("ucx: 4 KiB all_reduce latency (printed, fails only past 2 ms, i.e. a missed wake-up)", "[ucx][perf]") {
  using namespace tessera;
  for (int size : {2, 4}) {
    const std::string err = test::conformance::run_ranks(
        test::conformance::ucx_target(), size, [size](comm::Backend& b) {
          std::vector<float> x(1024, 1.0f);
          for (int i = 0; i < 200; ++i) b.all_reduce(test::conformance::view(x), comm::ReduceOp::Sum)->wait();
          constexpr int kIters = 2000;
          const auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < kIters; ++i) b.all_reduce(test::conformance::view(x), comm::ReduceOp::Max)->wait();
          const double us =
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kIters;
          if (b.rank() == 0) {
            std::printf("ucx all_reduce 4 KiB, %d processes: %.1f us\n", size, us);
            std::fflush(stdout);
          }
          if (us > 2000) test::conformance::fail(b, "4 KiB all_reduce took ", us, " us");
        });
    REQUIRE(err == "");
  }
}
