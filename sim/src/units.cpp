// Parsing and printing byte sizes and durations for the command line and reports.
#include "tessera/sim/units.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "tessera/core/error.hpp"

namespace tessera::sim {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string fixed4(double x, const char* unit) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g %s", x, unit);
  return buf;
}

}  // namespace

std::int64_t parse_byte_size(const std::string& text) {
  const auto bad = [&](const char* why) {
    return InvalidArgument(detail::cat("sim: byte size \"", text, "\" ", why,
                                       "; write a number with an optional suffix: B, K/KB, M/MB, "
                                       "G/GB, T/TB (×1000) or KiB, MiB, GiB, TiB (×1024)"));
  };
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw bad("does not start with a number");
  }
  std::string suffix = lower(text.substr(used));
  while (!suffix.empty() && suffix.front() == ' ') suffix.erase(0, 1);
  struct Unit {
    const char* name;
    double factor;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},          {"b", 1},          {"k", 1e3},         {"kb", 1e3},
      {"m", 1e6},       {"mb", 1e6},       {"g", 1e9},         {"gb", 1e9},
      {"t", 1e12},      {"tb", 1e12},      {"kib", 1024.0},    {"mib", 1048576.0},
      {"gib", 1073741824.0}, {"tib", 1099511627776.0}};
  for (const Unit& u : kUnits) {
    if (suffix != u.name) continue;
    const double bytes = value * u.factor;
    if (!(bytes >= 0) || bytes > 9e18) throw bad("is negative or too large");
    if (bytes != std::floor(bytes)) throw bad("is not a whole number of bytes");
    return static_cast<std::int64_t>(bytes);
  }
  throw bad("has an unknown suffix");
}

std::string format_bytes(std::int64_t bytes) {
  static constexpr const char* kBinary[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  static constexpr const char* kDecimal[] = {"B", "KB", "MB", "GB", "TB"};
  int i = 0;
  std::int64_t b = bytes;
  while (i < 4 && b >= 1024 && b % 1024 == 0) b /= 1024, ++i;
  if (i > 0) return std::to_string(b) + " " + kBinary[i];
  double x = static_cast<double>(bytes);
  i = 0;
  while (i < 4 && std::abs(x) >= 1000) x /= 1000, ++i;
  return i == 0 ? std::to_string(bytes) + " B" : fixed4(x, kDecimal[i]);
}

std::string format_duration(Picos t_ps) {
  const double t = static_cast<double>(t_ps);
  if (std::abs(t) < 1e3) return std::to_string(t_ps) + " ps";
  if (std::abs(t) < 1e6) return fixed4(t / 1e3, "ns");
  if (std::abs(t) < 1e9) return fixed4(t / 1e6, "us");
  if (std::abs(t) < 1e12) return fixed4(t / 1e9, "ms");
  return fixed4(t / 1e12, "s");
}

}  // namespace tessera::sim
