// Finds, in the running process, which BLAS library provides sgemm_ (the symbol Debian's libtorch
// calls), what it is (OpenBLAS, BLIS, MKL, the netlib reference) and how many threads it runs,
// and says whether a libtorch peer on it is set up as its users run it.
#pragma once

#include <string>

namespace tessera::bench {

/// The BLAS that serves sgemm_ in this process, as found at run time (not as built).
struct BlasInfo {
  /// Path the dynamic linker loaded sgemm_ from (e.g. /lib/x86_64-linux-gnu/libblas.so.3);
  /// empty when no sgemm_ is loaded.
  std::string library;
  /// `library` with every symlink resolved: the file Debian's alternatives point at.
  std::string resolved;
  /// The object holding the vendor's own entry points (OpenBLAS's libopenblas.so.0 behind
  /// Debian's libblas.so.3 shim), symlinks resolved; equals `resolved` when they coincide.
  std::string provider;
  /// "OpenBLAS", "BLIS", "MKL", "ATLAS", "reference" (netlib, Debian's libblas3) or "unknown".
  std::string vendor;
  /// What the vendor says about itself: openblas_get_config(), bli_info_get_version_str(), ...
  std::string config;
  /// "pthread", "openmp", "serial" or "" when the vendor does not say.
  std::string threading;
  /// Threads the BLAS runs a call on now; -1 when it cannot be asked.
  int threads = -1;
};

/// Looks up sgemm_ (then cblas_sgemm) with dlsym(RTLD_DEFAULT), the scope libtorch's own
/// references resolve in, names its shared object with dladdr, and asks that object and its
/// dependencies (dlopen RTLD_NOLOAD + dlsym) for vendor entry points. Never throws.
BlasInfo probe_blas();

/// Sets the BLAS's own thread count where the vendor has a call for it (OpenBLAS, BLIS, MKL;
/// libtorch's at::set_num_threads does not reach OpenBLAS or BLIS). Returns the count the BLAS
/// reports afterwards, or -1 when it cannot be set or asked.
int set_blas_threads(int threads);

/// Empty when a libtorch peer on `blas`, timed with `threads` threads, runs as its users run it;
/// otherwise one sentence saying what is wrong (the reference BLAS, a serial or capped
/// OpenBLAS/BLIS, no BLAS at all) and how to fix it.
std::string blas_peer_problem(const BlasInfo& blas, int threads);

/// One line for the readable table: vendor, config, threading, threads, file.
std::string describe(const BlasInfo& blas);

/// The same as one JSON object.
std::string blas_json(const BlasInfo& blas);

/// The process exit status of a benchmark that printed its figures but refused its ratios
/// because the peer was not set up as its users run it (bench/README.md).
constexpr int kExitPeerMisconfigured = 3;

}  // namespace tessera::bench
