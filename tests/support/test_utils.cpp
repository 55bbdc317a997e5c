// Test helpers: seeded data, float64 views, the closeness report and scratch folders.
#include "support/test_utils.hpp"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include "tessera/core/half.hpp"

namespace tessera::test {

TempDir::TempDir(const std::string& prefix) {
  static std::atomic<int> counter{0};
  path = std::filesystem::temp_directory_path() /
         (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::create_directories(path);
}

TempDir::~TempDir() {
  std::error_code ec;  // a destructor never throws: a folder left behind is harmless
  std::filesystem::remove_all(path, ec);
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<double> random_doubles(std::size_t n, std::uint64_t seed, double lo, double hi) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

core::Tensor random_tensor(const core::Shape& shape, core::DType dtype, std::uint64_t seed,
                           double lo, double hi) {
  return from_doubles(random_doubles(static_cast<std::size_t>(core::shape_numel(shape)), seed, lo, hi),
                      shape, dtype);
}

std::vector<double> to_doubles(const core::Tensor& t) {
  core::Tensor c = t.to_host().contiguous();  // a device tensor is copied to the host first
  std::vector<double> v(static_cast<std::size_t>(c.numel()));
  if (c.dtype() == core::DType::F32) {
    const float* p = c.data<float>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else if (c.dtype() == core::DType::F64) {
    const double* p = c.data<double>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else if (core::dtype_is_half(c.dtype())) {
    const std::uint16_t* p = c.data<std::uint16_t>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = core::half_to_float(p[i], c.dtype());
  } else {
    FAIL("to_doubles: unsupported dtype " << core::dtype_name(c.dtype()));
  }
  return v;
}

core::Tensor from_doubles(const std::vector<double>& values, const core::Shape& shape, core::DType dtype) {
  core::Tensor t = core::Tensor::empty(shape, dtype, core::MemCategory::Workspace);
  REQUIRE(static_cast<std::int64_t>(values.size()) == t.numel());
  if (dtype == core::DType::F32) {
    float* p = t.data<float>();
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<float>(values[i]);
  } else if (dtype == core::DType::F64) {
    double* p = t.data<double>();
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  } else if (core::dtype_is_half(dtype)) {
    std::uint16_t* p = t.data<std::uint16_t>();
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = core::double_to_half(values[i], dtype);
  } else {
    FAIL("from_doubles: unsupported dtype " << core::dtype_name(dtype));
  }
  return t;
}

Closeness compare(const std::vector<double>& actual, const std::vector<double>& ref, double rtol) {
  Closeness c;
  std::ostringstream os;
  if (actual.size() != ref.size()) {
    c.ok = false;
    os << "size mismatch: actual has " << actual.size() << " elements, reference " << ref.size();
    c.report = os.str();
    return c;
  }
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double e = std::abs(actual[i] - ref[i]);
    if (!(e <= c.max_abs_err)) {  // also catches NaN
      c.max_abs_err = std::isnan(e) ? INFINITY : e;
      c.worst = static_cast<std::int64_t>(i);
    }
    c.ref_scale = std::max(c.ref_scale, std::abs(ref[i]));
  }
  c.rel_err = c.ref_scale > 0 ? c.max_abs_err / c.ref_scale : (c.max_abs_err > 0 ? INFINITY : 0.0);
  c.ok = c.rel_err <= rtol;
  os.precision(6);
  os << (c.ok ? "close" : "NOT close") << ": " << ref.size() << " elements, max |err| "
     << c.max_abs_err << " at index " << c.worst;
  if (c.worst >= 0)
    os << " (actual " << actual[c.worst] << ", reference " << ref[c.worst] << ")";
  os << ", reference scale " << c.ref_scale << ", relative " << c.rel_err << " = "
     << (rtol > 0 ? 100.0 * c.rel_err / rtol : 0.0) << "% of the threshold " << rtol;
  c.report = os.str();
  return c;
}

double gamma_bound(core::DType dtype, std::int64_t m) {
  // The roundoff of the arithmetic: bf16/f16 compute in f32 (core::accumulate_dtype).
  const double u = core::unit_roundoff(core::accumulate_dtype(dtype));
  const double mu = double(m) * u;
  REQUIRE(mu < 0.5);
  return mu / (1 - mu);
}

Closeness compare_within(const std::vector<double>& actual, const std::vector<double>& ref,
                         const std::vector<double>& bound) {
  Closeness c;
  std::ostringstream os;
  if (actual.size() != ref.size() || bound.size() != ref.size()) {
    c.ok = false;
    os << "size mismatch: actual " << actual.size() << ", reference " << ref.size() << ", bound " << bound.size();
    c.report = os.str();
    return c;
  }
  double worst_share = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double e = std::abs(actual[i] - ref[i]);
    const double share = e == 0 ? 0.0 : (bound[i] > 0 ? e / bound[i] : INFINITY);
    if (!(share <= worst_share)) {  // also catches NaN
      worst_share = std::isnan(share) ? INFINITY : share;
      c.worst = static_cast<std::int64_t>(i);
      c.max_abs_err = e;
    }
  }
  c.ok = worst_share <= 1;
  c.rel_err = worst_share;
  os.precision(6);
  os << (c.ok ? "within" : "NOT within") << " the bound: " << ref.size() << " elements";
  if (c.worst >= 0)
    os << ", worst at index " << c.worst << " (actual " << actual[c.worst] << ", reference " << ref[c.worst]
       << ", |err| " << c.max_abs_err << " = " << 100 * worst_share << "% of its bound " << bound[c.worst] << ")";
  c.report = os.str();
  return c;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace tessera::test
