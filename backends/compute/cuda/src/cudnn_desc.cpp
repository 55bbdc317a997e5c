// cuDNN descriptors of tessera tensors and convolutions (see cudnn_desc.hpp).
#include "cudnn_desc.hpp"

#include "tessera/core/half.hpp"

namespace tessera::compute::cuda {

cudnnDataType_t cudnn_dtype(core::DType t, const char* what) {
  switch (t) {
    case core::DType::F32:
      return CUDNN_DATA_FLOAT;
    case core::DType::F64:
      return CUDNN_DATA_DOUBLE;
    case core::DType::BF16:
      return CUDNN_DATA_BFLOAT16;
    case core::DType::F16:
      return CUDNN_DATA_HALF;
    default:
      throw Unsupported(detail::cat("cuda ", what, ": ", core::dtype_name(t),
                                    " convolutions are not supported (f32, f64, bf16, f16)"));
  }
}

namespace {

int dim_int(std::int64_t v, const core::Tensor& t) {
  TESSERA_CHECK(v <= 0x7fffffff, "cuda conv: tensor ", t.describe(),
                " has a size or stride beyond cuDNN's int range");
  return static_cast<int>(v);
}

}  // namespace

TensorDesc::TensorDesc(const core::Tensor& t) {
  TESSERA_ASSERT(t.ndim() == 4, "cudnn tensor descriptor of ", t.describe());
  TESSERA_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_));
  int dims[4], strides[4];
  for (int i = 3; i >= 0; --i) {
    dims[i] = dim_int(t.size(i), t);
    // A size-1 dimension's stride is irrelevant; give cuDNN the packed one.
    const std::int64_t packed =
        i == 3 ? 1 : static_cast<std::int64_t>(strides[i + 1]) * dims[i + 1];
    strides[i] = dim_int(t.size(i) == 1 ? packed : t.stride(i), t);
  }
  TESSERA_CUDNN_CHECK(
      cudnnSetTensorNdDescriptor(d_, cudnn_dtype(t.dtype(), "conv"), 4, dims, strides));
}

FilterDesc::FilterDesc(const core::Tensor& w) {
  TESSERA_ASSERT(w.ndim() == 4 && w.is_contiguous(), "cudnn filter descriptor of ", w.describe());
  TESSERA_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d_));
  int dims[4];
  for (int i = 0; i < 4; ++i) dims[i] = dim_int(w.size(i), w);
  TESSERA_CUDNN_CHECK(
      cudnnSetFilterNdDescriptor(d_, cudnn_dtype(w.dtype(), "conv"), CUDNN_TENSOR_NCHW, 4, dims));
}

ConvDesc::ConvDesc(const Conv2dParams& p, int pad_h, int pad_w, core::DType dtype) {
  TESSERA_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d_));
  const int pads[2] = {pad_h, pad_w}, strides[2] = {p.stride_h, p.stride_w},
            dil[2] = {p.dilation_h, p.dilation_w};
  TESSERA_CUDNN_CHECK(
      cudnnSetConvolutionNdDescriptor(d_, 2, pads, strides, dil, CUDNN_CROSS_CORRELATION,
                                      cudnn_dtype(core::accumulate_dtype(dtype), "conv")));
  TESSERA_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d_, p.groups));
}

}  // namespace tessera::compute::cuda
