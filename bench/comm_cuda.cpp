// See comm_cuda.hpp.
#include "comm_cuda.hpp"

#include <stdexcept>
#include <string>

#if TESSERA_BENCH_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <vector>
#endif

namespace tessera::bench {

#if TESSERA_BENCH_CUDA
namespace {
void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ")");
}
}  // namespace

bool cuda_built() { return true; }

CudaFloats::CudaFloats(std::size_t count, float value) : n_(count) {
  ok(cudaMalloc(&p_, count * sizeof(float)), "cudaMalloc");
  const std::vector<float> host(count, value);
  ok(cudaMemcpy(p_, host.data(), count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}
CudaFloats::~CudaFloats() { cudaFree(p_); }
float CudaFloats::first() const {
  float v = 0;
  ok(cudaMemcpy(&v, p_, sizeof v, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  return v;
}

PinnedCopy pinned_copy_gbps(int reps) {
  const std::size_t bytes = std::size_t(64) << 20;
  void *host = nullptr, *dev = nullptr;
  ok(cudaHostAlloc(&host, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  ok(cudaMalloc(&dev, bytes), "cudaMalloc");
  auto median_gbps = [&](cudaMemcpyKind kind) {
    void* dst = kind == cudaMemcpyHostToDevice ? dev : host;
    const void* src = kind == cudaMemcpyHostToDevice ? host : dev;
    ok(cudaMemcpy(dst, src, bytes, kind), "cudaMemcpy");  // warm-up
    std::vector<double> g;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      ok(cudaMemcpy(dst, src, bytes, kind), "cudaMemcpy");
      g.push_back(bytes /
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                  1e9);
    }
    std::sort(g.begin(), g.end());
    return g[g.size() / 2];
  };
  PinnedCopy c;
  c.d2h_GBps = median_gbps(cudaMemcpyDeviceToHost);
  c.h2d_GBps = median_gbps(cudaMemcpyHostToDevice);
  cudaFree(dev);
  cudaFreeHost(host);
  return c;
}
#else
namespace {
[[noreturn]] void no_cuda() {
  throw std::runtime_error(
      "bench_comm was built without the CUDA toolkit: --cuda is not available");
}
}  // namespace

bool cuda_built() { return false; }
CudaFloats::CudaFloats(std::size_t, float) { no_cuda(); }
CudaFloats::~CudaFloats() = default;
float CudaFloats::first() const { no_cuda(); }
PinnedCopy pinned_copy_gbps(int) { no_cuda(); }
#endif

}  // namespace tessera::bench
