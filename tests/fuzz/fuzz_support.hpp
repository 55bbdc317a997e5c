// What every fuzz target shares: the verdict on an input (a tessera::Error is a clean rejection,
// anything else is a finding) and a per-process scratch file for parsers that read paths.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <typeinfo>

#include "tessera/core/error.hpp"

namespace tessera::fuzz {

/// Runs `parse` on one input. tessera::Error (and subclasses) is the documented way to refuse
/// bad input and counts as success; any other exception is reported and aborts, so libFuzzer
/// records the input as a crash. Crashes, sanitizer reports, timeouts and out-of-memory are
/// caught by libFuzzer itself.
template <class F>
int run_one(const char* target, F&& parse) {
  try {
    parse();
  } catch (const tessera::Error&) {
    // A clean rejection: the message names the problem.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz %s: escaped non-tessera exception %s: %s\n", target, typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz %s: escaped an exception that is not a std::exception\n", target);
    std::abort();
  }
  return 0;
}

/// A finding that is not an exception (a broken round trip, a violated invariant).
[[noreturn]] inline void finding(const char* target, const std::string& what) {
  std::fprintf(stderr, "fuzz %s: %s\n", target, what.c_str());
  std::abort();
}

/// "/tmp/tessera-fuzz-<pid>-<name>": one per process, so parallel fuzzing jobs do not collide.
inline std::string scratch_path(const std::string& name) {
  return "/tmp/tessera-fuzz-" + std::to_string(::getpid()) + "-" + name;
}

/// Writes `size` bytes to `path` (replacing it).
inline void write_bytes(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) finding("scratch", "cannot write " + path);
}

/// The bytes of a version 1.0 .npy file holding `data` (descr e.g. "<f4", shape e.g. "(2, 3)"):
/// the seeds' writer and the npy target's well-formed partner file.
inline std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

}  // namespace tessera::fuzz
