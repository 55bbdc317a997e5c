// The cpu backend's vector bf16/f16 conversions (backends/compute/cpu/src/convert.hpp) give the
// bits of core/half.hpp: widening every 16-bit pattern, narrowing every rounding boundary of both
// formats and a million random binary32 patterns (NaNs, infinities and subnormals among them), at
// every start offset and tail length the vector loops can meet.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "convert.hpp"
#include "support/test_utils.hpp"
#include "tessera/core/half.hpp"

using namespace tessera;
using core::DType;
namespace cpu = tessera::compute::cpu;

namespace {

/// The binary32 inputs of the narrowing check: around every bf16 boundary (each 16-bit upper half
/// with low halves 0, 1, 0x7fff, 0x8000 (the tie), 0x8001, 0xffff), around every f16 value and
/// tie (±1 binary32 unit), the specials, and random patterns.
std::vector<float> narrowing_inputs() {
  std::vector<float> out;
  for (std::uint32_t h = 0; h < 65536; ++h)
    for (std::uint32_t low : {0x0u, 0x1u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      out.push_back(std::bit_cast<float>((h << 16) | low));
  for (std::uint32_t h = 0; h < 65535; ++h) {
    if ((h & 0x7c00) == 0x7c00 || h == 0x7bff || h == 0xfbff) continue;  // NaN/inf, no successor
    const double v = core::f16_to_float(std::uint16_t(h)), next = core::f16_to_float(std::uint16_t(h + 1));
    for (double p : {v, (v + next) / 2}) {
      const float f = static_cast<float>(p);
      for (float g : {std::nextafter(f, -INFINITY), f, std::nextafter(f, INFINITY)}) out.push_back(g);
    }
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65520.0f, std::nextafter(65520.0f, 0.0f), 0x1p-24f, 0x1p-25f,
                  0x1p-126f, 0x1p-149f, std::numeric_limits<float>::max(), INFINITY, -INFINITY,
                  std::numeric_limits<float>::quiet_NaN(), std::bit_cast<float>(0x7f800001u),
                  std::bit_cast<float>(0xffbfffffu)})
    out.push_back(f);
  std::mt19937_64 rng(42);
  for (int i = 0; i < (1 << 20); ++i) out.push_back(std::bit_cast<float>(std::uint32_t(rng())));
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b, std::size_t& at) {
  for (at = 0; at < a.size(); ++at)
    if (std::bit_cast<std::uint32_t>(a[at]) != std::bit_cast<std::uint32_t>(b[at])) return false;
  return true;
}

}  // namespace

TEST_CASE("cpu convert: vector widening == core/half.hpp on every pattern", "[compute][cpu][half]") {
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t h = 0; h < 65536; ++h) all[h] = std::uint16_t(h);
  for (DType t : {DType::BF16, DType::F16}) {
    std::printf("cpu convert: %s widens with %s, narrows with %s\n", std::string(core::dtype_name(t)).c_str(),
                std::string(cpu::widen_path(t)).c_str(), std::string(cpu::narrow_path(t)).c_str());
    // Every start offset and tail length of the 8- and 16-lane loops.
    for (std::size_t off : {0, 1, 3, 7, 8, 15, 17}) {
      const std::int64_t n = std::int64_t(all.size() - off) - std::int64_t(off % 5);
      std::vector<float> got(static_cast<std::size_t>(n)), want(static_cast<std::size_t>(n));
      cpu::widen(all.data() + off, got.data(), n, t);
      cpu::widen_scalar(all.data() + off, want.data(), n, t);
      std::size_t at = 0;
      const bool same = same_bits(got, want, at);
      INFO(core::dtype_name(t) << " offset " << off << ": first difference at pattern 0x" << std::hex
                               << (same ? 0 : all[off + at]));
      REQUIRE(same);
      for (std::int64_t i = 0; i < n; i += 4099)
        REQUIRE(std::bit_cast<std::uint32_t>(got[std::size_t(i)]) ==
                std::bit_cast<std::uint32_t>(core::half_to_float(all[off + std::size_t(i)], t)));
    }
  }
}

TEST_CASE("cpu convert: vector narrowing == core/half.hpp at every boundary", "[compute][cpu][half]") {
  const std::vector<float> in = narrowing_inputs();
  for (DType t : {DType::BF16, DType::F16}) {
    for (std::size_t off : {0, 1, 5, 8, 13, 16}) {
      const std::int64_t n = std::int64_t(in.size() - off) - std::int64_t(off % 7);
      std::vector<std::uint16_t> got(static_cast<std::size_t>(n)), want(static_cast<std::size_t>(n));
      cpu::narrow(in.data() + off, got.data(), n, t);
      cpu::narrow_scalar(in.data() + off, want.data(), n, t);
      std::size_t i = 0;
      while (i < got.size() && got[i] == want[i]) ++i;
      INFO(core::dtype_name(t) << " offset " << off << ": first difference at f32 0x" << std::hex
                               << (i < got.size() ? std::bit_cast<std::uint32_t>(in[off + i]) : 0u) << ": vector 0x"
                               << (i < got.size() ? got[i] : 0) << ", half.hpp 0x" << (i < got.size() ? want[i] : 0));
      REQUIRE(i == got.size());
      for (std::size_t k = 0; k < got.size(); k += 4099) REQUIRE(got[k] == core::float_to_half(in[off + k], t));
    }
  }
}
