// bench_comm --cuda: device buffers for the ranks (cudaMalloc, filled and read with cudaMemcpy)
// and the pinned-memory copy bandwidth that bounds a backend staging CUDA buffers through host
// memory. Compiled against the CUDA runtime where the toolkit is found; elsewhere every function
// throws saying bench_comm was built without it.
#pragma once

#include <cstddef>

namespace tessera::bench {

/// True when this bench_comm was built with the CUDA toolkit.
bool cuda_built();

/// A cudaMalloc'ed array of floats, every element `value`.
class CudaFloats {
 public:
  CudaFloats(std::size_t count, float value);
  ~CudaFloats();
  CudaFloats(const CudaFloats&) = delete;
  CudaFloats& operator=(const CudaFloats&) = delete;
  void* data() const { return p_; }
  std::size_t count() const { return n_; }
  /// Element 0, copied back to the host.
  float first() const;

 private:
  void* p_ = nullptr;
  std::size_t n_ = 0;
};

/// Pinned host ↔ device cudaMemcpy of 64 MiB: median GB/s (1e9 bytes) over `reps`, each way.
struct PinnedCopy {
  double d2h_GBps = 0, h2d_GBps = 0;
};
PinnedCopy pinned_copy_gbps(int reps);

}  // namespace tessera::bench
