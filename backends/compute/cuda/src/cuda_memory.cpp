// CudaMemory: streams, the caching pool, and copy/add/fill of device tensors (see cuda_memory.hpp).
#include "cuda_memory.hpp"

#include <cstdint>
#include <limits>

#include "cuda_check.hpp"
#include "kernel_launch.hpp"

namespace tessera::compute::cuda {

using core::Tensor;

namespace {

std::string gib(std::size_t bytes) {
  return detail::cat(static_cast<double>(bytes) / static_cast<double>(1ull << 30), " GiB");
}

void check_same(const char* what, const Tensor& dst, const Tensor& src) {
  TESSERA_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype(), "cuda ", what,
                ": destination ", dst.describe(), " and source ", src.describe(),
                " must have one shape and dtype");
}

}  // namespace

CudaMemory::CudaMemory(int device) : device_(device) {
  make_current();
  cudaDeviceProp prop{};
  TESSERA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  sm_count_ = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
  describe_ =
      detail::cat("cuda:", device_, " (", prop.name, ", ", prop.totalGlobalMem >> 30, " GiB)");
  TESSERA_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  TESSERA_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
  TESSERA_CUDA_CHECK(cudaStreamCreateWithFlags(&upload_, cudaStreamNonBlocking));
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device_;
  TESSERA_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
  // Keep freed blocks in the pool (a training step allocates the same sizes every step).
  std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
  TESSERA_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));
}

CudaMemory::~CudaMemory() {
  // Tensors hold this object alive, so every block has been freed (stream-ordered) by now.
  TESSERA_CUDA_WARN(cudaSetDevice(device_));
  if (compute_) TESSERA_CUDA_WARN(cudaStreamSynchronize(compute_));
  if (comm_) TESSERA_CUDA_WARN(cudaStreamSynchronize(comm_));
  if (upload_) TESSERA_CUDA_WARN(cudaStreamSynchronize(upload_));
  if (pool_) TESSERA_CUDA_WARN(cudaMemPoolDestroy(pool_));
  if (comm_) TESSERA_CUDA_WARN(cudaStreamDestroy(comm_));
  if (upload_) TESSERA_CUDA_WARN(cudaStreamDestroy(upload_));
  if (compute_) TESSERA_CUDA_WARN(cudaStreamDestroy(compute_));
}

void CudaMemory::make_current() const { TESSERA_CUDA_CHECK(cudaSetDevice(device_)); }

void* CudaMemory::allocate(std::size_t bytes) {
  make_current();
  const std::size_t n = bytes == 0 ? 1 : bytes;  // a unique block even for zero bytes
  void* p = nullptr;
  cudaError_t e = cudaMallocFromPoolAsync(&p, n, pool_, compute_);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the sticky-free error state of this failure
    // Return the pool's cached blocks to the device and try once more.
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(compute_));
    TESSERA_CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0));
    e = cudaMallocFromPoolAsync(&p, n, pool_, compute_);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      std::size_t free_b = 0, total_b = 0;
      TESSERA_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
      throw OutOfMemory(
          detail::cat("cuda: out of memory on ", describe_, ": requested ", bytes, " bytes (",
                      gib(bytes), "); the pool reserves ", gib(reserved_bytes()),
                      ", the device has ", gib(free_b), " free of ", gib(total_b),
                      ". Use a smaller batch or input, or shard it over more ranks (--mesh sp=P)"));
    }
  }
  TESSERA_CUDA_CHECK(e);
  return p;
}

void CudaMemory::deallocate(void* p, std::size_t) noexcept {
  if (!p) return;
  TESSERA_CUDA_WARN(cudaSetDevice(device_));
  TESSERA_CUDA_WARN(cudaFreeAsync(p, compute_));
}

std::size_t CudaMemory::reserved_bytes() const {
  std::uint64_t v = 0;
  TESSERA_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &v));
  return static_cast<std::size_t>(v);
}

std::size_t CudaMemory::peak_reserved_bytes() const {
  std::uint64_t v = 0;
  TESSERA_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &v));
  return static_cast<std::size_t>(v);
}

bool CudaMemory::on_device(const Tensor& t) {
  cudaPointerAttributes a{};
  TESSERA_CUDA_CHECK(cudaPointerGetAttributes(&a, t.raw_data()));
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

void CudaMemory::device_copy(const Tensor& dst, const Tensor& src) {
  if (dst.is_contiguous() && src.is_contiguous()) {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(),
                                       cudaMemcpyDeviceToDevice, compute_));
    return;
  }
  tensor_copy(*this, dst, src);
}

void CudaMemory::copy_to_device(const Tensor& dst, const Tensor& src) {
  // Host side contiguous first (a host copy), then one transfer, then the strided kernel if dst is
  // strided. Host tensors are pageable memory, which cudaMemcpyAsync has read (into its own
  // staging) when it returns, so `host` may be a temporary.
  const Tensor host = src.contiguous();
  if (dst.is_contiguous()) {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), host.raw_data(), dst.nbytes(),
                                       cudaMemcpyHostToDevice, compute_));
    return;
  }
  const Tensor staging = device_scratch(*this, dst.shape(), dst.dtype());
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(staging.raw_data(), host.raw_data(), dst.nbytes(),
                                     cudaMemcpyHostToDevice, compute_));
  tensor_copy(*this, dst, staging);
}

void CudaMemory::copy_to_host(const Tensor& dst, const Tensor& src) {
  Tensor device_side = src;
  if (!src.is_contiguous()) {
    device_side = device_scratch(*this, src.shape(), src.dtype());
    tensor_copy(*this, device_side, src);
  }
  if (dst.is_contiguous()) {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), device_side.raw_data(), dst.nbytes(),
                                       cudaMemcpyDeviceToHost, compute_));
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(compute_));
    return;
  }
  const Tensor host = Tensor::empty(dst.shape(), dst.dtype());
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(host.raw_data(), device_side.raw_data(), dst.nbytes(),
                                     cudaMemcpyDeviceToHost, compute_));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(compute_));
  Tensor(dst).copy_from(host);  // host to host, strided
}

void CudaMemory::copy(const Tensor& dst, const Tensor& src) {
  check_same("copy", dst, src);
  if (dst.numel() == 0 || dst.is_meta() || src.is_meta()) return;
  make_current();
  const bool d_dev = on_device(dst), s_dev = on_device(src);
  if (d_dev && s_dev) return device_copy(dst, src);
  if (d_dev) return copy_to_device(dst, src);
  if (s_dev) return copy_to_host(dst, src);
  Tensor(dst).copy_from(src);  // both on the host
}

void CudaMemory::add(const Tensor& dst, const Tensor& src) {
  check_same("add", dst, src);
  if (dst.numel() == 0 || dst.is_meta() || src.is_meta()) return;
  make_current();
  TESSERA_CHECK(on_device(dst) && on_device(src), "cuda add: ", dst.describe(),
                " += ", src.describe(), " needs both tensors on ", describe_,
                " (copy the host one over first)");
  tensor_add(*this, dst, src);
}

void CudaMemory::fill(const Tensor& dst, double value) {
  if (dst.numel() == 0 || dst.is_meta()) return;
  make_current();
  TESSERA_CHECK(on_device(dst), "cuda fill: ", dst.describe(), " is not on ", describe_);
  if (value == 0.0 && dst.is_contiguous()) {
    TESSERA_CUDA_CHECK(cudaMemsetAsync(dst.raw_data(), 0, dst.nbytes(), compute_));
    return;
  }
  tensor_fill(*this, dst, value);
}

void CudaMemory::copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  make_current();
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, compute_));
  cudaPointerAttributes a{};
  TESSERA_CUDA_CHECK(cudaPointerGetAttributes(&a, dst));
  if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(compute_));
}

bool CudaMemory::pin_host(void* p, std::size_t bytes) {
  if (p == nullptr || bytes == 0) return false;
  make_current();
  if (cudaHostRegister(p, bytes, cudaHostRegisterPortable) != cudaSuccess) {
    (void)cudaGetLastError();  // not fatal: the copies stay synchronous
    return false;
  }
  return true;
}

void CudaMemory::unpin_host(void* p) noexcept {
  if (p == nullptr) return;
  if (cudaSetDevice(device_) == cudaSuccess) TESSERA_CUDA_WARN(cudaHostUnregister(p));
}

void CudaMemory::upload(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  make_current();
  // dst may still be read by kernels already queued on the compute stream (the slot's previous
  // batch): the copy waits for them, and nothing else.
  cudaEvent_t queued = nullptr;
  TESSERA_CUDA_CHECK(cudaEventCreateWithFlags(&queued, cudaEventDisableTiming));
  cudaError_t e = cudaEventRecord(queued, compute_);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(upload_, queued, 0);
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, upload_);
  if (e == cudaSuccess) e = cudaStreamSynchronize(upload_);
  TESSERA_CUDA_WARN(cudaEventDestroy(queued));
  TESSERA_CUDA_CHECK(e);
}

bool CudaMemory::stream_waits_for_issued(void* stream) {
  if (stream == nullptr) return false;
  make_current();  // the event belongs to the compute stream's device
  // One event per call, as in upload: the wait is enqueued when cudaStreamWaitEvent returns, so the
  // event may be destroyed at once (its resources go when the compute stream passes it), and two
  // threads ordering streams after this memory never share one.
  cudaEvent_t issued = nullptr;
  TESSERA_CUDA_CHECK(cudaEventCreateWithFlags(&issued, cudaEventDisableTiming));
  struct Destroy {
    cudaEvent_t e;
    ~Destroy() { TESSERA_CUDA_WARN(cudaEventDestroy(e)); }
  } destroy{issued};
  TESSERA_CUDA_CHECK(cudaEventRecord(issued, compute_));
  TESSERA_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), issued, 0));
  return true;
}

void CudaMemory::synchronize() {
  make_current();
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(compute_));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(comm_));
}

Tensor device_scratch(CudaMemory& mem, core::Shape shape, core::DType dtype) {
  const std::size_t bytes =
      static_cast<std::size_t>(core::shape_numel(shape)) * core::dtype_size(dtype);
  void* p = mem.allocate(bytes);
  std::shared_ptr<void> keep(p, [&mem, bytes](void* q) { mem.deallocate(q, bytes); });
  return Tensor::from_blob(p, std::move(shape), dtype, std::move(keep));
}

}  // namespace tessera::compute::cuda
