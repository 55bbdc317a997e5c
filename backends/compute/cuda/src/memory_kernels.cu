// The device memory's own kernels on strided tensors: fill (any dtype), copy (any dtype, moved as
// elements of its size), add (f32/f64). One thread per element, grid-stride; all memory-bound:
// for contiguous tensors they should reach the device's copy bandwidth (bytes moved per second).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_check.hpp"
#include "strided.hpp"

namespace tessera::compute::cuda {

namespace {

template <class T>
__global__ void fill_kernel(StridedView v, T value) {
  T* p = static_cast<T*>(v.data);
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < v.numel; i += step)
    p[v.offset_of(i)] = value;
}

// dst[i] = src[i] for elements of type T (a same-sized integer type for any dtype).
template <class T>
__global__ void copy_kernel(StridedView dst, StridedView src) {
  T* d = static_cast<T*>(dst.data);
  const T* s = static_cast<const T*>(src.data);
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < dst.numel; i += step)
    d[dst.offset_of(i)] = s[src.offset_of(i)];
}

// dst[i] += src[i].
template <class T>
__global__ void add_kernel(StridedView dst, StridedView src) {
  T* d = static_cast<T*>(dst.data);
  const T* s = static_cast<const T*>(src.data);
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < dst.numel; i += step)
    d[dst.offset_of(i)] += s[src.offset_of(i)];
}

constexpr int kThreads = 256;

unsigned grid_for(std::int64_t numel) {
  const std::int64_t blocks = (numel + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

template <class T>
void launch(const StridedView& v, T value, cudaStream_t stream) {
  fill_kernel<T><<<grid_for(v.numel), kThreads, 0, stream>>>(v, value);
  TESSERA_CUDA_CHECK(cudaGetLastError());
}

void check_pair(const char* what, const StridedView& dst, const StridedView& src) {
  bool same = dst.ndim == src.ndim && dst.dtype == src.dtype;
  for (int d = 0; same && d < dst.ndim; ++d) same = dst.shape[d] == src.shape[d];
  TESSERA_ASSERT(same, "cuda ", what, ": views of different shapes or dtypes");
}

}  // namespace

StridedView strided_view(const core::Tensor& t) {
  if (t.ndim() > kMaxKernelDims)
    throw Unsupported(detail::cat("cuda: tensor ", t.describe(), " has ", t.ndim(), " dimensions; the cuda kernels take at most ",
                                  kMaxKernelDims));
  StridedView v;
  v.data = t.raw_data();
  v.dtype = t.dtype();
  v.ndim = t.ndim();
  v.numel = t.numel();
  for (int d = 0; d < t.ndim(); ++d) {
    v.shape[d] = t.size(d);
    v.strides[d] = t.stride(d);
  }
  return v;
}

void launch_fill(const StridedView& v, double value, cudaStream_t stream) {
  if (v.numel == 0) return;
  switch (v.dtype) {
    case core::DType::F32: return launch(v, static_cast<float>(value), stream);
    case core::DType::F64: return launch(v, value, stream);
    case core::DType::BF16: return launch(v, __double2bfloat16(value), stream);
    case core::DType::F16: return launch(v, __double2half(value), stream);
    case core::DType::I32: return launch(v, static_cast<std::int32_t>(value), stream);
    case core::DType::I64: return launch(v, static_cast<std::int64_t>(value), stream);
  }
  throw InternalError("cuda fill: unknown dtype");
}

void launch_copy(const StridedView& dst, const StridedView& src, cudaStream_t stream) {
  check_pair("copy", dst, src);
  if (dst.numel == 0) return;
  const unsigned grid = grid_for(dst.numel);
  switch (core::dtype_size(dst.dtype)) {
    case 2: copy_kernel<std::uint16_t><<<grid, kThreads, 0, stream>>>(dst, src); break;
    case 4: copy_kernel<std::uint32_t><<<grid, kThreads, 0, stream>>>(dst, src); break;
    case 8: copy_kernel<std::uint64_t><<<grid, kThreads, 0, stream>>>(dst, src); break;
    default: throw InternalError("cuda copy: unexpected element size");
  }
  TESSERA_CUDA_CHECK(cudaGetLastError());
}

void launch_add(const StridedView& dst, const StridedView& src, cudaStream_t stream) {
  check_pair("add", dst, src);
  if (dst.numel == 0) return;
  const unsigned grid = grid_for(dst.numel);
  if (dst.dtype == core::DType::F32)
    add_kernel<float><<<grid, kThreads, 0, stream>>>(dst, src);
  else if (dst.dtype == core::DType::F64)
    add_kernel<double><<<grid, kThreads, 0, stream>>>(dst, src);
  else
    throw Unsupported(detail::cat("cuda: add of ", core::dtype_name(dst.dtype), " tensors (f32 and f64 only)"));
  TESSERA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tessera::compute::cuda
