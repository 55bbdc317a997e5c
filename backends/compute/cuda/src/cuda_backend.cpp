// CudaBackend: device selection, streams, events, library handles, and op routing (convolutions to
// cuDNN, linear to cuBLAS, everything else to the kernel launcher).
#include "cuda_backend.hpp"

#include "cuda_check.hpp"
#include "kernel_launch.hpp"

namespace tessera::compute::cuda {

namespace {

int checked_device(const BackendOptions& o) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0)
    throw Unsupported(detail::cat("cuda: built, ", probe_devices(), "; use --device cpu"));
  TESSERA_CHECK(o.device >= 0 && o.device < n, "cuda: device ", o.device, " requested but ", n,
                " CUDA device(s) are visible (0..", n - 1,
                "); pick another --device index or set CUDA_VISIBLE_DEVICES");
  return o.device;
}

cudnnHandle_t make_cudnn(cudaStream_t s) {
  cudnnHandle_t h = nullptr;
  TESSERA_CUDNN_CHECK(cudnnCreate(&h));
  const cudnnStatus_t st = cudnnSetStream(h, s);
  if (st != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(h);
    throw_cudnn(st, "cudnnSetStream(h, s)", __FILE__, __LINE__);
  }
  return h;
}

cublasHandle_t make_cublas(cudaStream_t s, bool tf32) {
  cublasHandle_t h = nullptr;
  TESSERA_CUBLAS_CHECK(cublasCreate(&h));
  cublasStatus_t st = cublasSetStream(h, s);
  // TF32 is opt-in in cuBLAS: default math computes f32 products in f32 (the compute type of each
  // GEMM says the same, see linear_cublas.cpp).
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  if (st != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(h);
    throw_cublas(st, "cublasSetStream/cublasSetMathMode", __FILE__, __LINE__);
  }
  return h;
}

}  // namespace

std::string probe_devices() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return detail::cat("no CUDA device visible (cudaGetDeviceCount: ", cudaGetErrorString(e), ")");
  if (n == 0) return "no CUDA device visible (cudaGetDeviceCount: 0 devices)";
  return "";
}

CudaBackend::CudaBackend(const BackendOptions& o)
    : memory_(std::make_shared<CudaMemory>(checked_device(o))),
      workspace_alloc_(
          std::make_shared<core::Allocator>(memory_->describe() + " workspace", memory_)),
      tf32_(o.tf32),
      conv_(nullptr, o.tf32),
      linear_(nullptr, o.tf32) {
  memory_->make_current();
  TESSERA_CUDA_CHECK(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
  TESSERA_CUDA_CHECK(cudaEventCreateWithFlags(&comm_done_, cudaEventDisableTiming));
  cudnn_ = make_cudnn(memory_->compute_stream());
  cublas_ = make_cublas(memory_->compute_stream(), tf32_);
  conv_ = CudnnConv(cudnn_, tf32_);
  linear_ = CublasLinear(cublas_, tf32_);
}

CudaBackend::~CudaBackend() {
  TESSERA_CUDA_WARN(cudaSetDevice(memory_->device()));
  // Library calls enqueued on the compute stream finish before their handles go.
  TESSERA_CUDA_WARN(cudaStreamSynchronize(memory_->compute_stream()));
  TESSERA_CUDA_WARN(cudaStreamSynchronize(memory_->comm_stream()));
  if (cublas_) cublasDestroy(cublas_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (comm_done_) TESSERA_CUDA_WARN(cudaEventDestroy(comm_done_));
  if (compute_done_) TESSERA_CUDA_WARN(cudaEventDestroy(compute_done_));
}

void CudaBackend::comm_waits_for_compute() {
  memory_->make_current();
  TESSERA_CUDA_CHECK(cudaEventRecord(compute_done_, memory_->compute_stream()));
  TESSERA_CUDA_CHECK(cudaStreamWaitEvent(memory_->comm_stream(), compute_done_, 0));
}

void CudaBackend::compute_waits_for_comm() {
  memory_->make_current();
  TESSERA_CUDA_CHECK(cudaEventRecord(comm_done_, memory_->comm_stream()));
  TESSERA_CUDA_CHECK(cudaStreamWaitEvent(memory_->compute_stream(), comm_done_, 0));
}

void CudaBackend::set_workspace_allocator(std::shared_ptr<core::Allocator> a) {
  TESSERA_CHECK(a && a->device() == memory_.get(),
                "cuda: set_workspace_allocator needs an allocator over ", memory_->describe(),
                " (core::Allocator(name, backend.device_memory())); got '",
                a ? a->name() : std::string("null"), "'");
  workspace_alloc_ = std::move(a);
}

void CudaBackend::execute(const OpCall& c) {
  memory_->make_current();
  const Workspace ws(*memory_, workspace_alloc_);
  switch (c.kind) {
    case OpKind::Conv2dForward:
      return conv_.forward(ws, c.conv, c.input("x"), c.input("w"), c.input_if("bias"),
                           c.output("y"));
    case OpKind::Conv2dBackwardData:
      return conv_.backward_data(ws, c.conv, c.input("dy"), c.input("w"), c.output("dx"),
                                 c.accumulate);
    case OpKind::Conv2dBackwardWeight:
      return conv_.backward_weight(ws, c.conv, c.input("x"), c.input("dy"), c.output("dw"),
                                   c.output_if("db"), c.accumulate);
    case OpKind::LinearForward:
      return linear_.forward(ws, c.input("x"), c.input("w"), c.input_if("bias"), c.output("y"));
    case OpKind::LinearBackward:
      return linear_.backward(ws, c.input("dy"), c.input("x"), c.input("w"), c.output_if("dx"),
                              c.output("dw"), c.output_if("db"), c.accumulate);
    default:
      return run_kernel(ws, c);
  }
}

}  // namespace tessera::compute::cuda
