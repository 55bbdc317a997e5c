// Conformance suite, part 5: bf16 and f16 buffers. Copies (batch_p2p, broadcast, all_gather) move
// the 16-bit patterns unchanged; reductions (all_reduce, reduce_scatter) widen to f32, accumulate
// in f32 and round once, so they are checked against a float64 reference of the exact 16-bit
// inputs within the bound that arithmetic gives (expect_half_reduction), bit for bit against the
// rank-order f32 emulation where the backend reduces in rank order, and bit-identical on every
// rank; f16 sums past 65504 must give ±inf, f32 partial sums past it must not.
#include <cmath>
#include <limits>

#include "comm/conformance.hpp"
#include "tessera/core/half.hpp"

namespace tessera::test::conformance {

namespace {

constexpr core::DType kHalfTypes[] = {core::DType::BF16, core::DType::F16};

/// A 16-bit buffer as a BufferView of dtype dt.
comm::BufferView half_view(std::vector<std::uint16_t>& v, core::DType dt) {
  return {v.data(), v.size(), dt, comm::MemorySpace::Host};
}

/// Any 16-bit pattern (NaNs with payloads, infinities, subnormals, -0 included): copies must
/// carry them unchanged.
std::vector<std::uint16_t> patterns(std::uint64_t seed, std::size_t count) {
  std::vector<std::uint16_t> v(count);
  for (std::size_t i = 0; i < count; ++i)
    v[i] = static_cast<std::uint16_t>(mix(seed ^ mix(i)) & 0xffffu);
  return v;
}

/// Sentinel bits no input of a check produces (a NaN pattern: reductions never return it).
constexpr std::uint16_t kHalfSentinel = 0x7fa5;

/// Element counts of the half reductions: kCounts, 5000 (the ucx halving all_reduce at 4 ranks)
/// and 20000 (past ucx's direct threshold: its rings and halving), and for Sum `large`, whose f32
/// blocks take ucx reduce steps of several 256 KiB chunks.
std::vector<std::size_t> half_counts(comm::ReduceOp op, std::size_t large) {
  std::vector<std::size_t> c(std::begin(kCounts), std::end(kCounts));
  c.push_back(5000);
  c.push_back(20000);
  if (op == comm::ReduceOp::Sum) c.push_back(large);
  return c;
}

/// "0x3f80".
std::string hex16(std::uint16_t bits) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(4) << std::setfill('0') << bits;
  return os.str();
}

/// Throws unless every rank holds the same `bits` (an FNV-1a hash of them, all-gathered).
void expect_same_on_every_rank(comm::Backend& b, const std::vector<std::uint16_t>& bits,
                               const std::string& what) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::uint16_t x : bits) h = (h ^ x) * 1099511628211ull;
  std::vector<std::int64_t> mine = {static_cast<std::int64_t>(h)};
  std::vector<std::int64_t> all(static_cast<std::size_t>(b.size()), 0);
  b.all_gather(view(mine), view(all))->wait();
  for (int r = 0; r < b.size(); ++r)
    if (all[static_cast<std::size_t>(r)] != mine[0])
      fail(b, what, ": the result differs from rank ", r, "'s (every rank must get the same bits)");
}

}  // namespace

std::vector<std::uint16_t> half_inputs(core::DType dt, std::uint64_t seed, int rank,
                                       std::size_t offset, std::size_t count) {
  std::vector<std::uint16_t> v(count);
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t i = offset + k;
    const double u = input_value<double>(seed, rank, i);  // [-1, 1)
    const double mag = (1.0 + std::fabs(u)) * std::ldexp(1.0, static_cast<int>(i % 13) - 6);
    v[k] = core::float_to_half(static_cast<float>(u < 0 ? -mag : mag), dt);
  }
  return v;
}

void expect_half_reduction(const comm::Backend& b, core::DType dt, comm::ReduceOp op,
                           const std::vector<std::uint16_t>& actual, std::uint64_t seed, int size,
                           std::size_t offset, bool rank_order, const std::string& what) {
  const std::size_t count = actual.size();
  std::vector<std::vector<std::uint16_t>> in;
  for (int r = 0; r < size; ++r) in.push_back(half_inputs(dt, seed, r, offset, count));
  const double n = size, u = core::unit_roundoff(dt), u32 = core::unit_roundoff(core::DType::F32);
  // f32 accumulation of n terms: |s32 - Σx| ≤ γ_{n-1}·Σ|x_i|, γ_k = k·u32/(1 − k·u32) (≈
  // (n−1)·2^-24·Σ|x_i|).
  const double gamma = (n - 1) * u32 / (1 - (n - 1) * u32);
  // The final rounding: u·|s32| in the normal range, plus at most half a step of the subnormal
  // range (f16: 2^-25) or bf16's flush of binary32 subnormals to zero (2^-126).
  const double eta = dt == core::DType::BF16 ? 0x1p-126 : 0x1p-25;
  for (std::size_t i = 0; i < count; ++i) {
    const float got = core::half_to_float(actual[i], dt);
    auto element = [&] {  // the failure message's start (built only on a failure)
      std::ostringstream os;
      os << std::setprecision(17) << what << ": element " << i << " of " << count << " is " << got
         << " (" << hex16(actual[i]) << ")";
      return os.str();
    };
    if (op == comm::ReduceOp::Max || op == comm::ReduceOp::Min) {
      // One of the inputs, unchanged: the reference picks it in float64, earlier rank on ties.
      std::uint16_t best = in[0][i];
      for (int r = 1; r < size; ++r) {
        const double x = core::half_to_float(in[static_cast<std::size_t>(r)][i], dt);
        const double a = core::half_to_float(best, dt);
        if (op == comm::ReduceOp::Max ? x > a : x < a) best = in[static_cast<std::size_t>(r)][i];
      }
      if (actual[i] != best) fail(b, element(), ", expected the input ", hex16(best));
      continue;
    }
    double ref = 0, abs_sum = 0;  // float64 of the exact 16-bit inputs, rank order
    for (int r = 0; r < size; ++r) {
      const double x = core::half_to_float(in[static_cast<std::size_t>(r)][i], dt);
      ref += x;
      abs_sum += std::fabs(x);
    }
    double e = gamma * abs_sum;
    if (op == comm::ReduceOp::Avg) {  // s32 / n in f32: one more f32 rounding
      ref /= n;
      e = e / n + u32 * (std::fabs(ref) + e / n);
    }
    const double bound = e + u * (std::fabs(ref) + e) + eta;
    if (!std::isfinite(got) || std::fabs(got - ref) > bound)
      fail(b, element(), ", expected ", ref, " within ", bound, " (f32 accumulation of ", size,
           " terms, then one rounding to ", core::dtype_name(dt), ")");
    if (rank_order) {
      // Widen, add in rank order in f32, divide in f32 (Avg), round once: these bits exactly.
      float acc = core::half_to_float(in[0][i], dt);
      for (int r = 1; r < size; ++r)
        acc += core::half_to_float(in[static_cast<std::size_t>(r)][i], dt);
      if (op == comm::ReduceOp::Avg) acc /= static_cast<float>(size);
      const std::uint16_t want = core::float_to_half(acc, dt);
      if (actual[i] != want)
        fail(b, element(), ", expected the rank-order f32 sum rounded once: ", hex16(want));
    }
  }
}

void check_half_copies(const ConformanceTarget& target, int size) {
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    const int n = b.size(), next = (b.rank() + 1) % n, prev = (b.rank() + n - 1) % n;
    for (core::DType dt : kHalfTypes) {
      // 20000 elements: past the ucx plugin's 16 KiB packed-message limit.
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1024},
                                std::size_t{20000}}) {
        const std::string what = label(dt, count);
        // batch_p2p ring, with a self send: every pattern arrives unchanged.
        const auto seed = [&](int src, int dst) {
          return case_seed(60, static_cast<int>(dt), count, src * 64 + dst);
        };
        std::vector<std::uint16_t> out = patterns(seed(b.rank(), next), count),
                                   self = patterns(seed(b.rank(), b.rank()), count);
        std::vector<std::uint16_t> in(count, kHalfSentinel), self_in(count, kHalfSentinel);
        b.batch_p2p({{comm::P2POp::Kind::Recv, half_view(in, dt), prev, 3},
                     {comm::P2POp::Kind::Send, half_view(out, dt), next, 3},
                     {comm::P2POp::Kind::Send, half_view(self, dt), b.rank(), 4},
                     {comm::P2POp::Kind::Recv, half_view(self_in, dt), b.rank(), 4}})
            ->wait();
        expect_equal(b, in, patterns(seed(prev, b.rank()), count),
                     "batch_p2p ring " + what + " from rank " + std::to_string(prev));
        expect_equal(b, self_in, self, "batch_p2p to itself " + what);
        // broadcast from the last rank, all_gather: copies, bit for bit.
        const int root = n - 1;
        std::vector<std::uint16_t> buf = b.rank() == root
                                             ? patterns(seed(root, 99), count)
                                             : std::vector<std::uint16_t>(count, kHalfSentinel);
        b.broadcast(half_view(buf, dt), root)->wait();
        expect_equal(b, buf, patterns(seed(root, 99), count), "broadcast " + what);
        std::vector<std::uint16_t> send = patterns(seed(b.rank(), 98), count);
        std::vector<std::uint16_t> recv(count * static_cast<std::size_t>(n), kHalfSentinel),
            expected;
        b.all_gather(half_view(send, dt), half_view(recv, dt))->wait();
        for (int r = 0; r < n; ++r) {
          auto block = patterns(seed(r, 98), count);
          expected.insert(expected.end(), block.begin(), block.end());
        }
        expect_equal(b, recv, expected, "all_gather " + what);
      }
    }
  });
  REQUIRE(err == "");
}

void check_half_all_reduce(const ConformanceTarget& target, int size) {
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    for (core::DType dt : kHalfTypes)
      for (comm::ReduceOp op : kAllOps)
        for (std::size_t count : half_counts(op, kLargeCount)) {
          const auto seed = case_seed(61, static_cast<int>(dt), static_cast<int>(op), count);
          std::vector<std::uint16_t> buf = half_inputs(dt, seed, b.rank(), 0, count);
          b.all_reduce(half_view(buf, dt), op)->wait();
          const std::string what = "all_reduce " + label(dt, op, count);
          expect_half_reduction(b, dt, op, buf, seed, b.size(), 0, target.rank_order_reductions,
                                what);
          expect_same_on_every_rank(b, buf, what);
        }
  });
  REQUIRE(err == "");
}

void check_half_reduce_scatter(const ConformanceTarget& target, int size) {
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    const auto n = static_cast<std::size_t>(b.size());
    for (core::DType dt : kHalfTypes)
      for (comm::ReduceOp op : kAllOps)
        for (std::size_t count : half_counts(op, 70001)) {  // 70001 f32: a 2-chunk ring block
          const auto seed = case_seed(62, static_cast<int>(dt), static_cast<int>(op), count);
          const std::vector<std::uint16_t> original = half_inputs(dt, seed, b.rank(), 0, n * count);
          std::vector<std::uint16_t> send = original, recv(count, kHalfSentinel);
          b.reduce_scatter(half_view(send, dt), half_view(recv, dt), op)->wait();
          const std::string what = "reduce_scatter " + label(dt, op, count);
          expect_half_reduction(b, dt, op, recv, seed, b.size(),
                                static_cast<std::size_t>(b.rank()) * count,
                                target.rank_order_reductions, what);
          expect_equal(b, send, original, what + ": the send buffer");
          // In place: recv is this rank's block of send.
          std::vector<std::uint16_t> inplace = original;
          comm::BufferView whole = half_view(inplace, dt);
          comm::BufferView mine{inplace.data() + static_cast<std::size_t>(b.rank()) * count, count,
                                dt};
          b.reduce_scatter(whole, mine, op)->wait();
          const std::vector<std::uint16_t> got(
              inplace.begin() + static_cast<std::ptrdiff_t>(b.rank() * count),
              inplace.begin() + static_cast<std::ptrdiff_t>((b.rank() + 1) * count));
          expect_equal(b, got, recv, what + " in place (recv = block rank of send)");
        }
  });
  REQUIRE(err == "");
}

void check_f16_overflow(const ConformanceTarget& target, int size) {
  // Integer-valued inputs: every partial sum (< 2^24) is exact in f32 whatever the order, so the
  // result is the exact sum rounded to f16 once: ±inf from 65520 (the midpoint past 65504, a tie
  // that rounds to even, i.e. to inf), finite below, even where a partial sum passed 65504.
  auto value = [](std::size_t i, int r, int n) -> float {
    switch (i % 5) {
      case 0:
        return 30000.0f;  // Σ = 30000·n: inf from 3 ranks
      case 1:
        return -30000.0f;  // -inf from 3 ranks
      case 2:
        return r < n - 1 ? 40000.0f : -40000.0f;  // partials 40000·(n−1), Σ = 40000·(n−2)
      case 3:
        return r == 0 ? 65504.0f : r == 1 ? 8.0f : 0.0f;  // 65512 → 65504
      default:
        return r == 0 ? 65504.0f : r == 1 ? 16.0f : 0.0f;  // 65520 → inf (2+ ranks)
    }
  };
  auto err = run_ranks(target, size, [&](comm::Backend& b) {
    const int n = b.size();
    for (comm::ReduceOp op : {comm::ReduceOp::Sum, comm::ReduceOp::Avg})
      for (std::size_t count : {std::size_t{5}, std::size_t{20000}}) {  // direct; rings and halving
        auto in = [&](int r, std::size_t first, std::size_t len) {
          std::vector<std::uint16_t> v(len);
          for (std::size_t k = 0; k < len; ++k) v[k] = core::float_to_f16(value(first + k, r, n));
          return v;
        };
        auto expected = [&](std::size_t first, std::size_t len) {
          std::vector<std::uint16_t> v(len);
          for (std::size_t k = 0; k < len; ++k) {
            double s = 0;
            for (int r = 0; r < n; ++r) s += value(first + k, r, n);
            if (op == comm::ReduceOp::Avg) s /= n;
            v[k] = std::fabs(s) >= 65520.0 ? (s < 0 ? 0xfc00 : 0x7c00)
                                           : core::float_to_f16(static_cast<float>(s));
          }
          return v;
        };
        std::vector<std::uint16_t> buf = in(b.rank(), 0, count);
        b.all_reduce(half_view(buf, core::DType::F16), op)->wait();
        const std::string what = "f16 overflow all_reduce " + label(core::DType::F16, op, count);
        expect_equal(b, buf, expected(0, count), what);
        if (n >= 3 && op == comm::ReduceOp::Sum && buf[0] != 0x7c00)
          fail(b, what, ": 30000·", n, " is not +inf");
        if (n == 3 && op == comm::ReduceOp::Sum && buf[2] != core::float_to_f16(40000.0f))
          fail(b, what, ": 40000 + 40000 − 40000 is not 40000 (a 16-bit partial sum overflowed)");
        std::vector<std::uint16_t> send;
        for (int q = 0; q < n; ++q) {
          auto block = in(b.rank(), static_cast<std::size_t>(q) * count, count);
          send.insert(send.end(), block.begin(), block.end());
        }
        std::vector<std::uint16_t> recv(count, kHalfSentinel);
        b.reduce_scatter(half_view(send, core::DType::F16), half_view(recv, core::DType::F16), op)
            ->wait();
        expect_equal(b, recv, expected(static_cast<std::size_t>(b.rank()) * count, count),
                     "f16 overflow reduce_scatter " + label(core::DType::F16, op, count));
      }
  });
  REQUIRE(err == "");
}

}  // namespace tessera::test::conformance
