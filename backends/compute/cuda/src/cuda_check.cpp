// The vendor-call error wrappers: a failing status becomes a BackendError with the call and place.
#include "cuda_check.hpp"

#include "tessera/core/report.hpp"

namespace tessera::compute::cuda {

void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  throw BackendError("cuda", static_cast<int>(e),
                     detail::cat(call, " failed at ", file, ":", line, ": ", cudaGetErrorName(e),
                                 ": ", cudaGetErrorString(e)));
}

void throw_cudnn(cudnnStatus_t s, const char* call, const char* file, int line) {
  char last[512] = {0};
  cudnnGetLastErrorString(last, sizeof last);
  throw BackendError("cudnn", static_cast<int>(s),
                     detail::cat(call, " failed at ", file, ":", line, ": ", cudnnGetErrorString(s),
                                 last[0] ? " (" : "", last, last[0] ? ")" : ""));
}

void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  throw BackendError("cublas", static_cast<int>(s),
                     detail::cat(call, " failed at ", file, ":", line, ": ", cublasGetStatusName(s),
                                 ": ", cublasGetStatusString(s)));
}

void warn_cuda(cudaError_t e, const char* call, const char* file, int line) noexcept {
  if (e == cudaSuccess) return;
  try {
    core::report(core::ReportLevel::Warning,
                 detail::cat("tessera cuda: ", call, " failed at ", file, ":", line, ": ",
                             cudaGetErrorString(e), " (ignored in a destructor)"));
  } catch (...) {
    // Out of memory for the message: the warning is lost, the destructor still must not throw.
  }
}

}  // namespace tessera::compute::cuda
