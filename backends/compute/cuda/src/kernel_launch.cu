// The GPU launcher of the kernel bodies (kernels/pass.hpp's launcher concept): each pass is one
// grid-stride launch of run_pass<Body> on the compute stream; the op's workspace comes from the
// backend's pool, booked as Workspace, and is freed stream-ordered after the op is enqueued. Also
// the tensor helpers (copy, add, fill) the device memory and the library paths use.
#include <algorithm>

#include "cuda_check.hpp"
#include "kernel_launch.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/pass.hpp"

namespace tessera::compute::cuda {

namespace launch {

template <class Body, class P>
__global__ void run_pass(P p, std::int64_t items) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    Body::run(p, i);
}

class GpuLauncher {
 public:
  /// `ws` null: the op may not ask for a workspace (the tensor helpers never do).
  GpuLauncher(CudaMemory& mem, const Workspace* ws)
      : ws_(ws), stream_(mem.compute_stream()), max_blocks_(32LL * mem.sm_count()) {}

  template <class Body, class P>
  void pass(const P& p, std::int64_t items) {
    if (items <= 0) return;
    constexpr int kThreads = 256;
    const std::int64_t blocks =
        std::min<std::int64_t>((items + kThreads - 1) / kThreads, max_blocks_);
    run_pass<Body, P><<<static_cast<unsigned>(blocks), kThreads, 0, stream_>>>(p, items);
    TESSERA_CUDA_CHECK(cudaGetLastError());
  }

  void* workspace(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    TESSERA_ASSERT(!scratch_.defined(), "a kernel asked for its workspace twice");
    TESSERA_ASSERT(ws_ != nullptr, "a tensor helper asked for a workspace");
    scratch_ = ws_->bytes(bytes);
    void* p = scratch_.raw_data();
    TESSERA_ASSERT(reinterpret_cast<std::uintptr_t>(p) % kernels::kWorkspaceAlign == 0,
                   "pool block not 256-byte aligned");
    return p;
  }

  core::Tensor scratch(const core::Shape& shape, core::DType dtype) {
    TESSERA_ASSERT(ws_ != nullptr, "a tensor helper asked for a scratch tensor");
    return ws_->tensor(shape, dtype);
  }

  void read_back(void* host_dst, const void* src, std::size_t bytes) {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  const Workspace* ws_;
  cudaStream_t stream_;
  std::int64_t max_blocks_;
  core::Tensor scratch_;  // freed (stream-ordered) when the launcher goes, after the op's passes
};

}  // namespace launch

void run_kernel(const Workspace& ws, const OpCall& call) {
  launch::GpuLauncher l(ws.memory(), &ws);
  kernels::run_kernel_op(l, call, "cuda");
}

void tensor_copy(CudaMemory& mem, const core::Tensor& dst, const core::Tensor& src) {
  launch::GpuLauncher l(mem, nullptr);
  core::Tensor d = dst;
  kernels::run_tensor_copy(l, src, d);
}

void tensor_add(CudaMemory& mem, const core::Tensor& dst, const core::Tensor& src) {
  launch::GpuLauncher l(mem, nullptr);
  core::Tensor d = dst;
  kernels::run_tensor_add(l, src, d);
}

void tensor_convert(CudaMemory& mem, const core::Tensor& dst, const core::Tensor& src) {
  launch::GpuLauncher l(mem, nullptr);
  core::Tensor d = dst;
  kernels::run_tensor_convert(l, src, d);
}

void tensor_fill(CudaMemory& mem, const core::Tensor& dst, double value) {
  launch::GpuLauncher l(mem, nullptr);
  core::Tensor d = dst;
  kernels::run_tensor_fill(l, d, value);
}

}  // namespace tessera::compute::cuda
