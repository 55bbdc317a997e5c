// core/half.hpp against an independent float64 reference: every one of the 65,536 bf16 and f16
// patterns widened, and narrowing (float and double) at every rounding boundary — each value, each
// tie between neighbours and the f32 values either side of it, the largest finite value and
// overflow, subnormals, signed zeros, NaN — plus random binary32 patterns; and Tensor::fill /
// add_from on bf16/f16 tensors.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "support/test_utils.hpp"
#include "tessera/core/half.hpp"
#include "tessera/core/tensor.hpp"

using namespace tessera;
using core::DType;

namespace {

// The format, from its field widths alone: bf16 8 exponent / 7 fraction bits, f16 5 / 10.
struct Format {
  int exp_bits, frac_bits;
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
};
Format format_of(DType t) { return t == DType::BF16 ? Format{8, 7} : Format{5, 10}; }

/// The value of 16-bit pattern h, decoded in float64 from its sign, exponent and fraction fields.
double decode(std::uint16_t h, DType t) {
  const Format f = format_of(t);
  const int sign = h >> 15, e = (h >> f.frac_bits) & ((1 << f.exp_bits) - 1);
  const int m = h & ((1 << f.frac_bits) - 1);
  double v;
  if (e == (1 << f.exp_bits) - 1)
    v = m ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  else if (e == 0)
    v = std::ldexp(double(m), 1 - f.bias() - f.frac_bits);  // subnormal
  else
    v = std::ldexp(double((1 << f.frac_bits) + m), e - f.bias() - f.frac_bits);
  return sign ? -v : v;
}

/// Every non-negative finite value of the format, in increasing order (index = pattern), followed
/// by the value one unit past the largest: the point from which a round to nearest overflows.
std::vector<double> positive_values(DType t) {
  std::vector<double> v;
  const std::uint16_t inf = t == DType::BF16 ? 0x7f80 : 0x7c00;
  for (std::uint32_t h = 0; h < inf; ++h) v.push_back(decode(std::uint16_t(h), t));
  v.push_back(2 * v.back() - v[v.size() - 2]);  // max + one unit in the last place
  return v;
}

/// x rounded to nearest, ties to the even pattern, from the table alone; bf16 narrows binary32
/// subnormals (|x| < 2^-126) to a signed zero (half.hpp's definition). NaN is handled by callers.
std::uint16_t reference_round(double x, DType t, const std::vector<double>& table) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::abs(x);
  if (t == DType::BF16 && a < 0x1p-126) return sign;
  const std::uint16_t inf = t == DType::BF16 ? 0x7f80 : 0x7c00;
  if (a >= table.back()) return sign | inf;
  // table[k] ≤ a < table[k + 1]
  const auto it = std::upper_bound(table.begin(), table.end(), a);
  const std::size_t k = std::size_t(it - table.begin()) - 1;
  const double lo = table[k], hi = table[k + 1];
  std::size_t pick = k;
  if (a - lo > hi - a || (a - lo == hi - a && (k & 1))) pick = k + 1;
  return std::uint16_t(sign | (pick == inf ? inf : pick));
}

/// The binary32 values the narrowing is tried at: each value of the format, the tie between it
/// and its successor, and the binary32 neighbours of both (both signs), plus specials.
std::vector<float> boundary_floats(const std::vector<double>& table) {
  std::vector<float> out;
  auto around = [&](double v) {
    const float f = static_cast<float>(v);
    if (std::isinf(f) && !std::isinf(v)) return;  // bf16's max + one unit, 2^128: past binary32
    REQUIRE(double(f) == v);  // every value and tie of bf16/f16 is a binary32
    for (float g : {std::nextafter(f, -INFINITY), f, std::nextafter(f, INFINITY)}) {
      out.push_back(g);
      out.push_back(-g);
    }
  };
  for (std::size_t k = 0; k + 1 < table.size(); ++k) {
    around(table[k]);
    around((table[k] + table[k + 1]) / 2);
  }
  around(table.back());
  for (float f : {0x1p-126f, 0x1p-149f, 0x1.fffffcp-127f, 0x1p-25f, 0x1p-24f, 0x1.8p-25f,
                  std::numeric_limits<float>::max(), INFINITY, 65504.0f, 65520.0f, 65519.99f})
    around(f);
  return out;
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> out(n);
  for (float& f : out) f = std::bit_cast<float>(std::uint32_t(rng()));
  return out;
}

}  // namespace

TEST_CASE("half: widening is exact for every bf16 and f16 pattern", "[core][half]") {
  for (DType t : {DType::BF16, DType::F16}) {
    INFO(core::dtype_name(t));
    for (std::uint32_t h = 0; h < 65536; ++h) {
      const double want = decode(std::uint16_t(h), t);
      const float got = core::half_to_float(std::uint16_t(h), t);
      INFO("pattern 0x" << std::hex << h);
      if (std::isnan(want)) {
        REQUIRE(std::isnan(got));
        REQUIRE(std::signbit(got) == bool(h & 0x8000));
        // The payload is kept: narrowing the widened NaN gives the pattern back, quieted.
        const std::uint16_t quiet = t == DType::BF16 ? 0x0040 : 0x0200;
        REQUIRE(core::float_to_half(got, t) == (h | quiet));
      } else {
        REQUIRE(double(got) == want);
        REQUIRE(std::signbit(got) == bool(h & 0x8000));
        // Every finite value and infinity narrows back to itself, but bf16's subnormals: they are
        // binary32 subnormals, which narrow to a signed zero.
        const bool bf16_subnormal = t == DType::BF16 && (h & 0x7f80) == 0 && (h & 0x7f) != 0;
        const std::uint16_t back = bf16_subnormal ? std::uint16_t(h & 0x8000) : std::uint16_t(h);
        REQUIRE(core::float_to_half(got, t) == back);
        REQUIRE(core::double_to_half(want, t) == back);
      }
    }
  }
}

TEST_CASE("half: narrowing rounds to nearest even at every boundary", "[core][half]") {
  for (DType t : {DType::BF16, DType::F16}) {
    INFO(core::dtype_name(t));
    const std::vector<double> table = positive_values(t);
    REQUIRE(table[table.size() - 2] == core::half_max(t));
    std::vector<float> tried = boundary_floats(table);
    for (float f : random_floats(1 << 20, 5)) tried.push_back(f);
    for (float f : tried) {
      INFO("f32 0x" << std::hex << std::bit_cast<std::uint32_t>(f) << " (" << f << ")");
      const std::uint16_t got = core::float_to_half(f, t);
      if (std::isnan(f)) {
        REQUIRE(std::isnan(core::half_to_float(got, t)));
        REQUIRE(bool(got & 0x8000) == std::signbit(f));
        continue;
      }
      REQUIRE(got == reference_round(double(f), t, table));
      REQUIRE(core::double_to_half(double(f), t) == got);
    }
  }
}

TEST_CASE("half: the named boundaries", "[core][half]") {
  using core::float_to_bf16, core::float_to_f16;
  // bf16: ties to even, the largest finite value, overflow, binary32 subnormals to signed zero.
  REQUIRE(float_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie, even below
  REQUIRE(float_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // tie, even above
  REQUIRE(float_to_bf16(std::bit_cast<float>(0x3f808001u)) == 0x3f81);
  REQUIRE(core::bf16_to_float(0x7f7f) == float(core::half_max(DType::BF16)));
  REQUIRE(float_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // past bf16's max: inf
  REQUIRE(float_to_bf16(std::bit_cast<float>(0x7f7f7fffu)) == 0x7f7f);
  REQUIRE(float_to_bf16(std::bit_cast<float>(0x7f7f8000u)) == 0x7f80);  // tie to even: inf
  REQUIRE(float_to_bf16(0x1p-127f) == 0x0000);
  REQUIRE(float_to_bf16(-0x1p-149f) == 0x8000);
  REQUIRE(float_to_bf16(0x1p-126f) == 0x0080);
  REQUIRE(float_to_bf16(-INFINITY) == 0xff80);
  REQUIRE(float_to_bf16(std::bit_cast<float>(0x7f800001u)) == 0x7fc0);  // signalling NaN quieted
  // f16: ties to even, 65504, overflow from 65520, subnormals down to 2^-24, 2^-25 a tie to 0.
  REQUIRE(float_to_f16(1.0f + 0x1p-11f) == 0x3c00);
  REQUIRE(float_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);
  REQUIRE(float_to_f16(65504.0f) == 0x7bff);
  REQUIRE(float_to_f16(std::nextafter(65520.0f, 0.0f)) == 0x7bff);
  REQUIRE(float_to_f16(65520.0f) == 0x7c00);
  REQUIRE(float_to_f16(-1e10f) == 0xfc00);
  REQUIRE(float_to_f16(0x1p-24f) == 0x0001);
  REQUIRE(float_to_f16(0x1p-25f) == 0x0000);
  REQUIRE(float_to_f16(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);
  REQUIRE(float_to_f16(0x1.8p-24f) == 0x0002);  // 1.5 units: tie to even
  REQUIRE(float_to_f16(-0x1p-14f) == 0x8400);    // the smallest normal
  REQUIRE(float_to_f16(std::bit_cast<float>(0xff800001u)) == 0xfe00);
  // f64 → 16 bits rounds once: a value just above a bf16 tie whose f32 rounding is the tie itself.
  const double above_tie = 1.0 + 0x1p-8 + 0x1p-40;  // f32(x) = 1 + 2^-8, the tie
  REQUIRE(float_to_bf16(float(above_tie)) == 0x3f80);           // twice rounded: down
  REQUIRE(core::double_to_half(above_tie, DType::BF16) == 0x3f81);  // once: up
  REQUIRE(core::double_to_half(1.0 + 0x1p-11 + 0x1p-40, DType::F16) == 0x3c01);
  REQUIRE(core::double_to_half(1e300, DType::F16) == 0x7c00);
  REQUIRE(core::double_to_half(-1e-300, DType::BF16) == 0x8000);
}

TEST_CASE("half: random doubles narrow as the float64 reference rounds them", "[core][half]") {
  std::mt19937_64 rng(11);
  for (DType t : {DType::BF16, DType::F16}) {
    const std::vector<double> table = positive_values(t);
    const double top = t == DType::BF16 ? 130 : 17;  // exponents up to past the largest finite value
    std::uniform_real_distribution<double> mant(1, 2), ex(t == DType::BF16 ? -140 : -28, top);
    for (int i = 0; i < 200000; ++i) {
      const double x = (i & 1 ? -1 : 1) * std::ldexp(mant(rng), int(std::floor(ex(rng))));
      INFO(core::dtype_name(t) << " " << x);
      REQUIRE(core::double_to_half(x, t) == reference_round(x, t, table));
    }
  }
}

TEST_CASE("half: Tensor::fill and add_from on bf16/f16 tensors round once", "[core][half][tensor]") {
  for (DType t : {DType::BF16, DType::F16}) {
    INFO(core::dtype_name(t));
    core::Tensor a = core::Tensor::empty({3, 5}, t), b = core::Tensor::empty({3, 5}, t);
    const double v = 1.0 + 0x1p-8 + 0x1p-40;  // a double rounding would differ (see above)
    a.fill(v);
    b.fill(0.3);
    for (int i = 0; i < 15; ++i) {
      REQUIRE(a.data<std::uint16_t>()[i] == core::double_to_half(v, t));
      REQUIRE(b.data<std::uint16_t>()[i] == core::double_to_half(0.3, t));
    }
    // a (strided view) += b: widened, added in f32 (exact here), rounded once.
    core::Tensor view = a.narrow(1, 1, 3), src = b.narrow(1, 0, 3);
    view.add_from(src);
    const float sum = core::half_to_float(core::double_to_half(v, t), t) +
                      core::half_to_float(core::double_to_half(0.3, t), t);
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 5; ++c) {
        const std::uint16_t want =
            c >= 1 && c <= 3 ? core::float_to_half(sum, t) : core::double_to_half(v, t);
        REQUIRE(a.data<std::uint16_t>()[r * 5 + c] == want);
      }
    REQUIRE_THROWS_AS(a.data<float>(), InvalidArgument);
    a.zero();
    REQUIRE(a.data<std::uint16_t>()[7] == 0);
  }
}
