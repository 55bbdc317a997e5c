// Small helpers shared by the benchmarks: repeated timing with median and spread, the FMA peak
// and bf16 dot-product peak probes and a minimal JSON writer.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessera::bench {

/// Median and spread of repeated measurements (milliseconds).
struct Stats {
  double median = 0, min = 0, max = 0, q1 = 0, q3 = 0;
  int reps = 0;
};

/// Order statistics of the samples (q1/q3 by linear interpolation).
inline Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const double pos = q * double(v.size() - 1);
    const std::size_t i = std::size_t(pos);
    const double f = pos - double(i);
    return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
  };
  s.median = at(0.5), s.q1 = at(0.25), s.q3 = at(0.75), s.min = v.front(), s.max = v.back();
  s.reps = int(v.size());
  return s;
}

/// Runs fn once to warm up, then `reps` timed times; wall-clock milliseconds per run.
template <class Fn>
Stats time_ms(int reps, Fn&& fn) {
  fn();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return stats_of(ms);
}

/// Single-precision FMA throughput of `threads` threads (each `iters` × 12 independent vector
/// FMAs), in GFLOP/s. AVX-512 where the build targets it, else AVX2+FMA, else scalar.
inline double fma_peak_gflops(int threads, long iters = 20'000'000) {
  auto body = [iters](float* sink) {
#if defined(__AVX512F__)
    constexpr int kLanes = 16;
    __m512 acc[12];
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-3f);
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_ps(float(k));
    for (long i = 0; i < iters; ++i)
      for (int k = 0; k < 12; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
    for (int k = 1; k < 12; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
    *sink = _mm512_reduce_add_ps(acc[0]);
#elif defined(__AVX2__) && defined(__FMA__)
    constexpr int kLanes = 8;
    __m256 acc[12];
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-3f);
    for (int k = 0; k < 12; ++k) acc[k] = _mm256_set1_ps(float(k));
    for (long i = 0; i < iters; ++i)
      for (int k = 0; k < 12; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
    for (int k = 1; k < 12; ++k) acc[0] = _mm256_add_ps(acc[0], acc[k]);
    float out[8];
    _mm256_storeu_ps(out, acc[0]);
    *sink = out[0];
#else
    constexpr int kLanes = 1;
    float acc[12];
    for (int k = 0; k < 12; ++k) acc[k] = float(k);
    for (long i = 0; i < iters; ++i)
      for (int k = 0; k < 12; ++k) acc[k] = acc[k] * 0.999999f + 1e-3f;
    *sink = acc[0];
#endif
    return kLanes;
  };
  std::vector<float> sinks(threads);
  int lanes = 1;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back([&, t] { body(&sinks[t]); });
  lanes = body(&sinks[0]);
  for (auto& t : pool) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 2.0 * 12 * lanes * double(iters) * threads / s * 1e-9;
}

/// Throughput of the CPU's bf16 dot product VDPBF16PS (AVX512_BF16: 16 lanes × 2 bf16 products
/// summed into f32, 64 flops an instruction) on `threads` threads, each `iters` × 12 independent
/// instructions, in GFLOP/s; 0 where the CPU lacks AVX512_BF16 (checked at run time, so a build
/// for another CPU still runs). Beside fma_peak_gflops it says whether bf16 dot products beat
/// widening to f32 and FMA-ing there: on this project's Intel machines without exposed AMX they
/// run at half the FMA rate (bench/README.md).
#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bf16"))) inline float bf16_dot_body(long iters) {
  __m512 acc[12];
  alignas(64) std::uint16_t one[32], small[32];
  for (int k = 0; k < 32; ++k) one[k] = 0x3f80, small[k] = 0x3a83;  // bf16 1 and 1e-3
  const __m512bh a = (__m512bh)_mm512_load_si512(one), b = (__m512bh)_mm512_load_si512(small);
  for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_ps(float(k));
  for (long i = 0; i < iters; ++i)
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], a, b);
  for (int k = 1; k < 12; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  return _mm512_reduce_add_ps(acc[0]);
}
inline bool have_avx512_bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}
#else
inline float bf16_dot_body(long) { return 0; }
inline bool have_avx512_bf16() { return false; }
#endif
inline double bf16_dot_peak_gflops(int threads, long iters = 20'000'000) {
  if (!have_avx512_bf16()) return 0;
  std::vector<float> sinks(threads);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back([&, t] { sinks[t] = bf16_dot_body(iters); });
  sinks[0] = bf16_dot_body(iters);
  for (auto& t : pool) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 64.0 * 12 * double(iters) * threads / s * 1e-9;
}

/// `s` as a JSON string literal: quotes and backslashes escaped, control characters as spaces.
inline std::string json_quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += (unsigned char)c < 0x20 ? ' ' : c;
  }
  return o + "\"";
}

/// Builds one JSON object by appending "key": value pairs (keys are ours and need no escaping).
class Json {
 public:
  Json& num(const std::string& k, double v) {
    char buf[64];
    // Whole numbers (byte counts, ranks) exactly; measurements to 6 significant digits.
    if (v == std::floor(v) && std::abs(v) < 9007199254740992.0)
      std::snprintf(buf, sizeof buf, "%.0f", v);
    else
      std::snprintf(buf, sizeof buf, "%.6g", v);
    return raw(k, buf);
  }
  Json& str(const std::string& k, const std::string& v) { return raw(k, json_quote(v)); }
  Json& raw(const std::string& k, const std::string& v) {
    body_ += (body_.empty() ? "" : ", ") + ("\"" + k + "\": ") + v;
    return *this;
  }
  Json& stats(const std::string& prefix, const Stats& s) {
    return num(prefix + "median", s.median)
        .num(prefix + "min", s.min)
        .num(prefix + "max", s.max)
        .num(prefix + "q1", s.q1)
        .num(prefix + "q3", s.q3)
        .num("reps", s.reps);
  }
  std::string str() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

/// "[a, b, c]" from already-formatted JSON values.
inline std::string json_array(const std::vector<std::string>& items) {
  std::string s = "[";
  for (std::size_t i = 0; i < items.size(); ++i) s += (i ? ",\n  " : "\n  ") + items[i];
  return s + (items.empty() ? "]" : "\n]");
}

/// A benchmark's main(): returns run(argc, argv); an exception is printed to stderr as
/// "`program`: what" and gives exit status 1. With --json, stdout still holds one JSON object
/// ({"error": what}), which scripts keep as the run's figures.
inline int run_main(const char* program, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], "--json") == 0)
        std::printf("{\"error\": %s}\n", json_quote(e.what()).c_str());
    return 1;
  }
}

}  // namespace tessera::bench
