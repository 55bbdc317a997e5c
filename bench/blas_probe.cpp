// Run-time identification of the BLAS behind sgemm_ in this process (see blas_probe.hpp).
#include "blas_probe.hpp"

#include "bench_util.hpp"

#include <dlfcn.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace tessera::bench {
namespace {

std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  return !p.empty() && realpath(p.c_str(), buf) ? std::string(buf) : p;
}

// The loaded object that serves sgemm_ for the whole process, as a dlopen handle (RTLD_NOLOAD:
// only ever one already loaded; never loads anything), plus its dladdr name. dlsym on that handle
// searches the object, then its dependencies: OpenBLAS's libblas.so.3 shim finds
// openblas_get_config in the libopenblas.so.0 it links, while another BLAS loaded elsewhere in
// the process is not found.
struct Loaded {
  void* handle = nullptr;
  std::string name;
};

Loaded blas_object() {
  Loaded l;
  for (const char* sym : {"sgemm_", "cblas_sgemm"}) {
    void* p = dlsym(RTLD_DEFAULT, sym);
    Dl_info info{};
    if (!p || !dladdr(p, &info) || !info.dli_fname) continue;
    l.name = info.dli_fname;
    l.handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    return l;
  }
  return l;
}

template <class Fn>
Fn lookup(const Loaded& l, const char* name) {
  return l.handle ? reinterpret_cast<Fn>(dlsym(l.handle, name)) : nullptr;
}

std::string object_of(void* fn) {
  Dl_info info{};
  return fn && dladdr(fn, &info) && info.dli_fname ? real_path(info.dli_fname) : std::string();
}

// "x86_64-linux-gnu" from "/lib/x86_64-linux-gnu/libblas.so.3": Debian's alternative names
// carry the multiarch triplet.
std::string multiarch_of(const std::string& path) {
  const auto slash = path.rfind('/');
  const auto prev = slash == std::string::npos ? slash : path.rfind('/', slash - 1);
  if (prev == std::string::npos) return "x86_64-linux-gnu";
  const std::string dir = path.substr(prev + 1, slash - prev - 1);
  return dir.find("-linux-") != std::string::npos ? dir : "x86_64-linux-gnu";
}

}  // namespace

BlasInfo probe_blas() {
  BlasInfo b;
  const Loaded l = blas_object();
  if (l.name.empty()) {
    b.vendor = "none";
    return b;
  }
  b.library = l.name;
  b.resolved = real_path(l.name);
  b.provider = b.resolved;

  using Str = char* (*)();
  using Int = int (*)();
  using Int64 = std::int64_t (*)();
  if (auto config = lookup<Str>(l, "openblas_get_config")) {
    b.vendor = "OpenBLAS";
    b.provider = object_of(reinterpret_cast<void*>(config));
    b.config = config();
    if (auto core = lookup<Str>(l, "openblas_get_corename"))
      b.config += std::string(" core=") + core();
    if (auto par = lookup<Int>(l, "openblas_get_parallel")) {
      const int p = par();
      b.threading = p == 0 ? "serial" : p == 1 ? "pthread" : "openmp";
    }
    if (auto n = lookup<Int>(l, "openblas_get_num_threads")) b.threads = n();
  } else if (auto ver = lookup<Str>(l, "bli_info_get_version_str")) {
    b.vendor = "BLIS";
    b.provider = object_of(reinterpret_cast<void*>(ver));
    b.config = std::string("BLIS ") + ver();
    auto pth = lookup<Int64>(l, "bli_info_get_enable_pthreads");
    auto omp = lookup<Int64>(l, "bli_info_get_enable_openmp");
    b.threading = omp && omp() ? "openmp" : pth && pth() ? "pthread" : "serial";
    if (auto n = lookup<Int64>(l, "bli_thread_get_num_threads")) b.threads = int(n());
  } else if (auto mkl = lookup<void (*)(char*, int)>(l, "MKL_Get_Version_String")) {
    b.vendor = "MKL";
    b.provider = object_of(reinterpret_cast<void*>(mkl));
    char buf[256] = {};
    mkl(buf, sizeof buf - 1);
    b.config = buf;
    if (auto n = lookup<Int>(l, "MKL_Get_Max_Threads")) b.threads = n();
  } else if (auto atl = lookup<void (*)()>(l, "ATL_buildinfo")) {
    b.vendor = "ATLAS";
    b.provider = object_of(reinterpret_cast<void*>(atl));
  } else if (b.resolved.find("/blas/libblas.so") != std::string::npos) {
    // Debian's libblas3 installs the netlib reference as <libdir>/blas/libblas.so.3.x: plain
    // Fortran loops, no vendor entry points, one thread.
    b.vendor = "reference";
    b.config = "netlib reference BLAS (Debian libblas3)";
    b.threading = "serial";
    b.threads = 1;
  } else {
    b.vendor = "unknown";
  }
  return b;
}

int set_blas_threads(int threads) {
  const Loaded l = blas_object();
  if (auto set = lookup<void (*)(int)>(l, "openblas_set_num_threads")) {
    set(threads);
    auto get = lookup<int (*)()>(l, "openblas_get_num_threads");
    return get ? get() : -1;
  }
  if (auto set = lookup<void (*)(std::int64_t)>(l, "bli_thread_set_num_threads")) {
    set(threads);
    auto get = lookup<std::int64_t (*)()>(l, "bli_thread_get_num_threads");
    return get ? int(get()) : -1;
  }
  if (auto set = lookup<void (*)(int)>(l, "MKL_Set_Num_Threads")) {
    set(threads);
    auto get = lookup<int (*)()>(l, "MKL_Get_Max_Threads");
    return get ? get() : -1;
  }
  return -1;
}

std::string blas_peer_problem(const BlasInfo& b, int threads) {
  const std::string ma = multiarch_of(b.library.empty() ? "/lib/x86_64-linux-gnu/x" : b.library);
  const std::string fix =
      "install OpenBLAS with tools/setup.sh (or: apt-get install libopenblas0-pthread; "
      "update-alternatives --auto libblas.so.3-" +
      ma + ")";
  if (b.vendor == "none")
    return "no BLAS (sgemm_) is loaded in this process, so libtorch's BLAS cannot be checked; " +
           fix;
  if (b.vendor == "reference") {
    std::string why = "libtorch runs on the netlib reference BLAS (" + b.resolved +
                      "): one thread, untuned loops, several times slower than OpenBLAS, not "
                      "how libtorch's users run it";
    const std::string system = real_path("/usr/lib/" + ma + "/libblas.so.3");
    if (!system.empty() && system != b.resolved)
      why += "; the system's libblas.so.3 is " + system +
             ", so LD_LIBRARY_PATH or LD_PRELOAD overrides it in this process: unset them";
    return why + "; " + fix;
  }
  if (threads > 1 && b.threading == "serial")
    return "libtorch runs on a single-threaded " + b.vendor + " build (" + b.resolved +
           ") while the peer is timed on " + std::to_string(threads) +
           " threads; install the threaded one with tools/setup.sh (or: apt-get install "
           "libopenblas0-pthread)";
  if (b.threads >= 0 && b.threads < threads)
    return b.vendor + " runs " + std::to_string(b.threads) +
           " thread(s) while the peer is timed on " + std::to_string(threads) +
           " (a thread cap such as OPENBLAS_NUM_THREADS, BLIS_NUM_THREADS or MKL_NUM_THREADS?); "
           "unset it";
  return "";
}

std::string describe(const BlasInfo& b) {
  if (b.vendor == "none") return "none loaded (no sgemm_ in the process)";
  std::string s = b.vendor;
  if (!b.threading.empty()) s += ", " + b.threading;
  if (b.threads >= 0) s += ", " + std::to_string(b.threads) + " thread(s)";
  if (!b.config.empty()) s += " (" + b.config + ")";
  s += ": sgemm_ from " + b.library;
  if (b.resolved != b.library) s += " -> " + b.resolved;
  if (b.provider != b.resolved) s += ", kernels in " + b.provider;
  return s;
}

std::string blas_json(const BlasInfo& b) {
  const auto& q = json_quote;
  return "{\"vendor\": " + q(b.vendor) + ", \"config\": " + q(b.config) +
         ", \"threading\": " + q(b.threading) + ", \"threads\": " + std::to_string(b.threads) +
         ", \"library\": " + q(b.library) + ", \"resolved\": " + q(b.resolved) +
         ", \"provider\": " + q(b.provider) + "}";
}

}  // namespace tessera::bench
