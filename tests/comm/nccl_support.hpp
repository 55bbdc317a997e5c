// Helpers of the nccl tests: the GPU probe (run in a child process, so the test process never
// initialises CUDA before it forks its ranks), device buffers filled and read with plain CUDA
// runtime calls, and the skip macro of the gpu-labelled tests.
#pragma once

#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "comm/conformance.hpp"
#include "support/catch.hpp"

namespace tessera::test::nccl {

/// How many CUDA devices a fresh process sees, and why none when 0.
struct Devices {
  int count = 0;
  std::string why_none;
};

inline Devices probe_devices() {
  int p[2];
  if (::pipe(p) != 0) return {0, "pipe() failed"};
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    std::string out = e == cudaSuccess ? std::to_string(n) + " " : std::string("0 ");
    if (e != cudaSuccess) out += std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    else if (n == 0) out += "cudaGetDeviceCount returned 0";
    [[maybe_unused]] ssize_t w = ::write(p[1], out.data(), out.size());
    ::close(p[1]);
    ::_exit(0);
  }
  ::close(p[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  Devices d;
  const auto sp = got.find(' ');
  if (sp == std::string::npos) return {0, "the CUDA probe process died"};
  d.count = std::stoi(got.substr(0, sp));
  d.why_none = got.substr(sp + 1);
  return d;
}

/// Throws CheckFailure naming the call unless it succeeded.
inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw conformance::CheckFailure(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

/// A cudaMalloc'ed array of T, filled and read back with cudaMemcpy.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (n_) cuda_ok(cudaMalloc(&p_, n_ * sizeof(T)), "cudaMalloc");
  }
  explicit DeviceBuffer(const std::vector<T>& v) : DeviceBuffer(v.size()) { upload(v); }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const std::vector<T>& v) {
    if (n_) cuda_ok(cudaMemcpy(p_, v.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    if (n_) cuda_ok(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return v;
  }
  comm::BufferView view() { return {p_, n_, core::dtype_of<T>, comm::MemorySpace::Cuda}; }
  T* data() { return static_cast<T*>(p_); }

 private:
  void* p_ = nullptr;
  std::size_t n_;
};

}  // namespace tessera::test::nccl

/// First statement of every gpu-labelled test: skips it (ctest's skip status) with the reason
/// where no GPU is visible.
#define TESSERA_NCCL_REQUIRE_GPU(devices_var)                                                      \
  const ::tessera::test::nccl::Devices devices_var = ::tessera::test::nccl::probe_devices();       \
  if (devices_var.count == 0)                                                                     \
  TESSERA_SKIP("no GPU: no CUDA device visible ("                                                 \
               << devices_var.why_none << "); run the GPU check bundle on a machine with a GPU (tests/gpu/README.md)")
