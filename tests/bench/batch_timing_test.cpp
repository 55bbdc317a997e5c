// The size of bench_conv's timed batches (bench/gpu_bench.hpp, calls_per_batch): enough
// back-to-back calls to last the minimum, so that a short call is not timed with a host wait
// around it. bench/torch_gpu_peer.py sizes the PyTorch side's batches by the same rule.
#include <cmath>
#include <limits>

#include "gpu_bench.hpp"
#include "support/catch.hpp"

using tessera::bench::calls_per_batch;
using tessera::bench::kMaxCallsPerBatch;

TEST_CASE("calls_per_batch fills the minimum batch time with whole calls", "[bench]") {
  const auto [call_ms, min_ms, want] = GENERATE(table<double, double, int>({
      {0.25, 10, 40},  // a short depthwise call: 40 of them
      {0.3, 10, 34},   // 33.3 calls are not enough: 34
      {2.5, 10, 4},    // exactly 4
      {3.0, 10, 4},
      {10.0, 10, 1},
      {20.0, 10, 1},  // longer than the minimum: one call
      {1e-6, 10, kMaxCallsPerBatch},
  }));
  CAPTURE(call_ms, min_ms);
  const int n = calls_per_batch(call_ms, min_ms);
  REQUIRE(n == want);
  if (n < kMaxCallsPerBatch) {
    REQUIRE(n * call_ms >= min_ms - 1e-9);            // the batch lasts the minimum ...
    REQUIRE((n == 1 || (n - 1) * call_ms < min_ms));  // ... with no call more than needed
  }
}

TEST_CASE("calls_per_batch takes the most calls for a call that timed as zero or not a number",
          "[bench]") {
  REQUIRE(calls_per_batch(0.0, 10) == kMaxCallsPerBatch);
  REQUIRE(calls_per_batch(-1.0, 10) == kMaxCallsPerBatch);
  REQUIRE(calls_per_batch(std::numeric_limits<double>::quiet_NaN(), 10) == kMaxCallsPerBatch);
}
