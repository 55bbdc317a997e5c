// Helpers shared by the test suites: seeded random tensors, conversion to float64, and the
// comparison that prints the worst element (llm.c's check_tensor style), the message of an
// expected exception, and scratch folders for tests that write files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::test {

/// The message of the exception of type E that `fn` throws, or "<no exception>" when it returns.
/// An exception of another type propagates, so the test fails on it.
template <class E = InvalidArgument, class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "<no exception>";
}

/// A fresh folder under the system's temporary directory (named `prefix`, the process id and a
/// counter, so parallel tests never share one), removed with its contents at scope end.
struct TempDir {
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// The path of `name` inside the folder.
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::filesystem::path path;
};

/// Writes `bytes` to `path` (replacing it), REQUIREing that the write succeeded.
void write_file(const std::filesystem::path& path, const std::string& bytes);

/// The bytes of `path` ("" when it cannot be read).
std::string read_bytes(const std::filesystem::path& path);

/// Tensor of `shape` with values uniform in [lo, hi), from a seeded generator (same seed, same data).
core::Tensor random_tensor(const core::Shape& shape, core::DType dtype, std::uint64_t seed,
                           double lo = -1.0, double hi = 1.0);
/// Values uniform in [lo, hi) as float64 (row-major), from a seeded generator.
std::vector<double> random_doubles(std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0);
/// Elements of an f32/f64/bf16/f16 tensor (any strides) in row-major order, as float64 (exact).
std::vector<double> to_doubles(const core::Tensor& t);
/// A contiguous tensor holding `values` (row-major) converted to `dtype` (rounded to nearest once;
/// bf16/f16 by core::double_to_half).
core::Tensor from_doubles(const std::vector<double>& values, const core::Shape& shape, core::DType dtype);

/// The bytes of a host tensor's elements in row-major order (any strides), for bit-for-bit checks.
inline std::string bytes_of(const core::Tensor& t) {
  const core::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.raw_data()), c.nbytes());
}

/// Result of comparing `actual` with a float64 reference.
struct Closeness {
  bool ok = true;
  double max_abs_err = 0;   ///< max_i |a_i − r_i|
  double ref_scale = 0;     ///< max_i |r_i|
  double rel_err = 0;       ///< max_abs_err / ref_scale (0 when both are 0)
  std::int64_t worst = -1;  ///< index of the worst element
  std::string report;       ///< one line naming the worst element and the error vs the threshold
};

/// Tensor-scaled relative error: max_i |a_i − r_i| ≤ rtol · max_i |r_i|. Element-wise relative
/// error is meaningless where sums cancel to near zero; scaling by the tensor's largest magnitude
/// is what an fp32 dot product of bounded length guarantees.
Closeness compare(const std::vector<double>& actual, const std::vector<double>& ref, double rtol);

/// How much further from float64 than the float32 one-rank computation a float32 sharded one may
/// be (the float32 rule: tests/nn/train_equivalence.hpp says why and what was measured).
inline constexpr double kFp32Factor = 16;

/// γ_m = m·u/(1 − m·u) with the unit roundoff u of `dtype`'s arithmetic (2^-24 for f32 and for
/// bf16/f16, which compute in f32; 2^-53 for f64): the
/// relative error bound of m roundings (Higham, Accuracy and Stability of Numerical Algorithms,
/// §3.1). A sum of m products computed in any order, blocking, vector width, with or without FMA,
/// is within γ_{m+1}·Σ|products| of the exact sum.
double gamma_bound(core::DType dtype, std::int64_t m);

/// Element-wise: |a_i − r_i| ≤ bound_i for every i. The report names the element with the largest
/// share of its bound.
Closeness compare_within(const std::vector<double>& actual, const std::vector<double>& ref,
                         const std::vector<double>& bound);

/// Σ a_i·b_i in float64.
double dot(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace tessera::test

/// REQUIRE that `actual` (vector<double>) is within `rtol` (tensor-scaled) of `ref`.
#define REQUIRE_CLOSE(actual, ref, rtol)                                       \
  do {                                                                         \
    const auto tessera_close_ = ::tessera::test::compare((actual), (ref), (rtol)); \
    INFO(tessera_close_.report);                                               \
    REQUIRE(tessera_close_.ok);                                                \
  } while (0)

/// REQUIRE that every element of `actual` is within `bound` (a vector) of `ref`.
#define REQUIRE_WITHIN(actual, ref, bound)                                         \
  do {                                                                             \
    const auto tessera_within_ = ::tessera::test::compare_within((actual), (ref), (bound)); \
    INFO(tessera_within_.report);                                                  \
    REQUIRE(tessera_within_.ok);                                                   \
  } while (0)
