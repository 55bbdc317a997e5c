// The convolutions through cuDNN (see conv_cudnn.hpp). Each call: map the output window onto
// cuDNN's symmetric padding (conv_window.hpp; an input view, or a zero-padded frame where no view
// fits), pick the algorithm once per geometry (cudnnGet*_v7 heuristics: deterministic first, TF32
// only when allowed, the workspace cudnnGetConvolution*WorkspaceSize states for the algorithm with
// the call's descriptors and math type at most kWorkspaceLimit; cached with the algorithm and
// allocated for every call of the geometry), then one cuDNN call with beta = 1 for
// `accumulate`. bf16/f16 calls: x, dy, y, dx in 16 bits, accumulation in f32 (the convolution
// descriptor's compute type), tensor-core algorithms allowed; an f32 weight is rounded into
// scratch of the call's dtype first, and an f32 dw/db is computed in the call's dtype into scratch,
// then widened into (added to) the f32 tensor: what PyTorch AMP does (the weight gradient of the
// bf16 copy of an f32 parameter, widened by the cast's backward).
#include "conv_cudnn.hpp"

#include <cuda_runtime.h>

#include <vector>

#include "conv_window.hpp"
#include "cudnn_desc.hpp"
#include "kernel_launch.hpp"
#include "tessera/core/half.hpp"

namespace tessera::compute::cuda {

using core::Tensor;

namespace {

/// The input of a call as cuDNN gets it: a view of the caller's tensor or a zero-padded frame.
struct Input {
  Tensor t;
  int pad_h = 0, pad_w = 0;
  bool framed = false;
  ConvDimPlan h, w;
};

Input plan_input(const Conv2dParams& p, const Tensor& x, const Tensor& out) {
  Input in;
  in.h = plan_conv_dim(x.size(2), out.size(2), p.kernel_h, p.stride_h, p.pad_h, p.dilation_h);
  in.w = plan_conv_dim(x.size(3), out.size(3), p.kernel_w, p.stride_w, p.pad_w, p.dilation_w);
  in.framed = !in.h.direct || !in.w.direct;
  if (!in.framed) {
    in.t = x.narrow(2, in.h.first, in.h.rows).narrow(3, in.w.first, in.w.rows);
    in.pad_h = in.h.pad, in.pad_w = in.w.pad;
  }
  return in;
}

/// The rows [lo, lo + rows) of a frame that hold input rows [0, extent): first input row, first
/// frame row, count.
struct Overlap {
  std::int64_t in_first, frame_first, count;
};
Overlap overlap(std::int64_t lo, std::int64_t rows, std::int64_t extent) {
  const std::int64_t a = std::max<std::int64_t>(lo, 0),
                     b = std::min<std::int64_t>(lo + rows, extent);
  if (b <= a) return {0, 0, 0};
  return {a, a - lo, b - a};
}

/// The frame's interior (frame rows holding input rows) and the input rows it holds.
std::pair<Tensor, Tensor> frame_interior(const Tensor& frame, const Tensor& x, const Input& in) {
  const Overlap oh = overlap(in.h.frame_lo, in.h.frame_rows, x.size(2));
  const Overlap ow = overlap(in.w.frame_lo, in.w.frame_rows, x.size(3));
  return {frame.narrow(2, oh.frame_first, oh.count).narrow(3, ow.frame_first, ow.count),
          x.narrow(2, oh.in_first, oh.count).narrow(3, ow.in_first, ow.count)};
}

/// A zero frame of the input (forward, weight gradient) holding x's rows where they fall.
Tensor make_frame(const Workspace& ws, const Tensor& x, const Input& in) {
  Tensor frame = ws.tensor({x.size(0), x.size(1), in.h.frame_rows, in.w.frame_rows}, x.dtype());
  cudaStream_t s = ws.memory().compute_stream();
  TESSERA_CUDA_CHECK(cudaMemsetAsync(frame.raw_data(), 0, frame.nbytes(), s));
  auto [inner, src] = frame_interior(frame, x, in);
  if (inner.numel() > 0) tensor_copy(ws.memory(), inner, src);
  return frame;
}

/// w itself when contiguous and of `dtype`, else a contiguous device copy in `dtype` (cuDNN
/// filters are packed and of the data's dtype: an f32 weight of a bf16/f16 call is rounded).
Tensor packed(const Workspace& ws, const Tensor& w, core::DType dtype) {
  if (w.is_contiguous() && w.dtype() == dtype) return w;
  Tensor c = ws.tensor(w.shape(), dtype);
  if (w.dtype() == dtype)
    tensor_copy(ws.memory(), c, w);
  else
    tensor_convert(ws.memory(), c, w);
  return c;
}

/// The math type the heuristics are asked with: FMA for f32 without TF32 (no tensor cores), tensor
/// ops for bf16/f16 (exact 16-bit products, f32 accumulation), cuDNN's default otherwise.
cudnnMathType_t query_math(core::DType dtype, bool tf32) {
  if (dtype == core::DType::F32 && !tf32) return CUDNN_FMA_MATH;
  if (core::dtype_is_half(dtype)) return CUDNN_TENSOR_OP_MATH;
  return CUDNN_DEFAULT_MATH;
}

std::string key(const char* op, const Tensor& a, const Tensor& b, const Tensor& c, int ph, int pw,
                const Conv2dParams& p, bool tf32) {
  std::string k = detail::cat(op, core::dtype_name(a.dtype()), tf32 ? "/tf32" : "");
  for (const Tensor* t : {&a, &b, &c})
    k += core::shape_str(t->shape()) + core::shape_str(t->strides());
  return k + detail::cat("/", ph, ",", pw, "/", p.stride_h, ",", p.stride_w, "/", p.dilation_h, ",",
                         p.dilation_w, "/", p.groups);
}

/// The first usable entry of cuDNN's ranked list: status OK, no tensor cores for f32 unless `tf32`,
/// deterministic entries first, and a workspace of at most kWorkspaceLimit as cuDNN states it for
/// this algorithm, the call's descriptors and the math type it will run with:
/// `workspace_of(algo, math, &bytes)` sets the math type on the convolution descriptor and asks
/// cudnnGetConvolution*WorkspaceSize (false when the query fails: the entry is skipped). The
/// heuristic's own `memory` figure is not used: it can be below what the algorithm needs for these
/// descriptors. Unsupported when no entry is usable.
template <class Perf, class WorkspaceOf>
CudnnConv::Choice pick(const char* op, const std::vector<Perf>& perf, int n, bool f32, bool tf32,
                       WorkspaceOf&& workspace_of) {
  for (const bool want_deterministic : {true, false}) {
    for (int i = 0; i < n; ++i) {
      const Perf& r = perf[static_cast<std::size_t>(i)];
      if (r.status != CUDNN_STATUS_SUCCESS) continue;
      if (f32 && !tf32 && r.mathType != CUDNN_FMA_MATH && r.mathType != CUDNN_DEFAULT_MATH)
        continue;
      if (want_deterministic && r.determinism != CUDNN_DETERMINISTIC) continue;
      CudnnConv::Choice c;
      c.algo = static_cast<int>(r.algo);
      // Without TF32, FMA math keeps cuDNN's default-math kernels from converting to TF32.
      c.math = (f32 && !tf32) ? CUDNN_FMA_MATH : r.mathType;
      std::size_t bytes = 0;
      if (!workspace_of(c.algo, c.math, &bytes) || bytes > CudnnConv::kWorkspaceLimit) continue;
      c.workspace = bytes;
      return c;
    }
  }
  throw Unsupported(
      detail::cat("cuda ", op, ": cuDNN offers no algorithm for this geometry and dtype",
                  f32 && !tf32 ? " without TF32 (try --tf32)" : "", " within a workspace of ",
                  CudnnConv::kWorkspaceLimit >> 20, " MiB"));
}

}  // namespace

void CudnnConv::forward(const Workspace& ws, const Conv2dParams& p, const Tensor& x,
                        const Tensor& w, const Tensor* bias, const Tensor& y) {
  if (y.numel() == 0) return;
  const Input in = plan_input(p, x, y);
  const Tensor xin = in.framed ? make_frame(ws, x, in) : in.t;
  const Tensor wp = packed(ws, w, x.dtype());
  const TensorDesc xd(xin), yd(y);
  const FilterDesc wd(wp);
  ConvDesc cd(p, in.pad_h, in.pad_w, x.dtype());
  const bool f32 = x.dtype() == core::DType::F32;
  const std::string k = key("fwd", xin, wp, y, in.pad_h, in.pad_w, p, tf32_);
  auto it = algos_.find(k);
  if (it == algos_.end()) {
    cd.set_math(query_math(x.dtype(), tf32_));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
    int n = 0;
    TESSERA_CUDNN_CHECK(
        cudnnGetConvolutionForwardAlgorithm_v7(handle_, xd.get(), wd.get(), cd.get(), yd.get(),
                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf.data()));
    const auto workspace_of = [&](int algo, cudnnMathType_t math, std::size_t* bytes) {
      return cudnnSetConvolutionMathType(cd.get(), math) == CUDNN_STATUS_SUCCESS &&
             cudnnGetConvolutionForwardWorkspaceSize(
                 handle_, xd.get(), wd.get(), cd.get(), yd.get(),
                 static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes) == CUDNN_STATUS_SUCCESS;
    };
    it = algos_.emplace(k, pick("conv2d_forward", perf, n, f32, tf32_, workspace_of)).first;
  }
  const Choice& c = it->second;
  cd.set_math(c.math);
  const Tensor wsb = ws.bytes(c.workspace);
  // bf16/f16 with a bias: y = the bias (rounded to y's dtype) broadcast, then the convolution
  // added with beta = 1, so y is rounded once: round(conv + bias), as cuBLAS's bias path.
  const bool half_bias = bias && core::dtype_is_half(x.dtype());
  if (half_bias) {
    const Tensor rows = Tensor::from_blob(bias->raw_data(), y.shape(), bias->dtype(), nullptr,
                                          {0, bias->stride(0), 0, 0});
    tensor_convert(ws.memory(), y, rows);
  }
  const Scalars s(x.dtype(), 1.0, half_bias ? 1.0 : 0.0);
  TESSERA_CUDNN_CHECK(cudnnConvolutionForward(
      handle_, s.alpha(), xd.get(), xin.raw_data(), wd.get(), wp.raw_data(), cd.get(),
      static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), wsb.defined() ? wsb.raw_data() : nullptr,
      c.workspace, s.beta(), yd.get(), y.raw_data()));
  if (bias && !half_bias) {
    const Tensor bview =
        Tensor::from_blob(bias->raw_data(), {1, bias->size(0), 1, 1}, bias->dtype(), nullptr,
                          {bias->size(0) * bias->stride(0), bias->stride(0), 1, 1});
    const TensorDesc bd(bview);
    const Scalars one(x.dtype(), 1.0, 1.0);
    TESSERA_CUDNN_CHECK(cudnnAddTensor(handle_, one.alpha(), bd.get(), bview.raw_data(), one.beta(),
                                       yd.get(), y.raw_data()));
  }
}

void CudnnConv::backward_data(const Workspace& ws, const Conv2dParams& p, const Tensor& dy,
                              const Tensor& w, const Tensor& dx, bool accumulate) {
  if (dx.numel() == 0) return;
  if (dy.numel() == 0) {
    if (!accumulate) ws.memory().fill(dx, 0.0);
    return;
  }
  const Input in = plan_input(p, dx, dy);
  // The gradient lands in a view of dx (rows outside it get none) or in a frame whose interior is
  // then copied (added) into dx.
  Tensor target;
  bool whole = false;
  if (in.framed) {
    target = ws.tensor({dx.size(0), dx.size(1), in.h.frame_rows, in.w.frame_rows}, dx.dtype());
  } else {
    target = in.t;
    whole = target.shape() == dx.shape();
    if (!whole && !accumulate) ws.memory().fill(dx, 0.0);
  }
  const double beta = (!in.framed && (accumulate || !whole)) ? 1.0 : 0.0;
  const Tensor wp = packed(ws, w, dx.dtype());
  const TensorDesc dxd(target), dyd(dy);
  const FilterDesc wd(wp);
  ConvDesc cd(p, in.pad_h, in.pad_w, dx.dtype());
  const bool f32 = dx.dtype() == core::DType::F32;
  const std::string k = key("bwd_data", target, wp, dy, in.pad_h, in.pad_w, p, tf32_);
  auto it = algos_.find(k);
  if (it == algos_.end()) {
    cd.set_math(query_math(dx.dtype(), tf32_));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
    int n = 0;
    TESSERA_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        handle_, wd.get(), dyd.get(), cd.get(), dxd.get(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
        &n, perf.data()));
    const auto workspace_of = [&](int algo, cudnnMathType_t math, std::size_t* bytes) {
      return cudnnSetConvolutionMathType(cd.get(), math) == CUDNN_STATUS_SUCCESS &&
             cudnnGetConvolutionBackwardDataWorkspaceSize(
                 handle_, wd.get(), dyd.get(), cd.get(), dxd.get(),
                 static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes) == CUDNN_STATUS_SUCCESS;
    };
    it = algos_.emplace(k, pick("conv2d_backward_data", perf, n, f32, tf32_, workspace_of)).first;
  }
  const Choice& c = it->second;
  cd.set_math(c.math);
  const Tensor wsb = ws.bytes(c.workspace);
  const Scalars s(dx.dtype(), 1.0, beta);
  TESSERA_CUDNN_CHECK(cudnnConvolutionBackwardData(
      handle_, s.alpha(), wd.get(), wp.raw_data(), dyd.get(), dy.raw_data(), cd.get(),
      static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), wsb.defined() ? wsb.raw_data() : nullptr,
      c.workspace, s.beta(), dxd.get(), target.raw_data()));
  if (in.framed) {
    // Frame rows outside the input are gradients of zero padding: dropped.
    if (!accumulate) ws.memory().fill(dx, 0.0);
    auto [inner, dst] = frame_interior(target, dx, in);
    if (inner.numel() > 0) tensor_add(ws.memory(), dst, inner);
  }
}

void CudnnConv::backward_weight(const Workspace& ws, const Conv2dParams& p, const Tensor& x,
                                const Tensor& dy, const Tensor& dw, const Tensor* db,
                                bool accumulate) {
  if (dy.numel() == 0 || x.size(0) == 0) {
    if (!accumulate) {
      ws.memory().fill(dw, 0.0);
      if (db) ws.memory().fill(*db, 0.0);
    }
    return;
  }
  const Input in = plan_input(p, x, dy);
  const Tensor xin = in.framed ? make_frame(ws, x, in) : in.t;
  // cuDNN's filter gradient is packed and of the data's dtype: a strided dw, or an f32 dw of a
  // bf16/f16 call, gets a packed result in x's dtype copied (widened, added) in.
  const bool direct_dw = dw.is_contiguous() && dw.dtype() == x.dtype();
  const Tensor dwp = direct_dw ? dw : ws.tensor(dw.shape(), x.dtype());
  const TensorDesc xd(xin), dyd(dy);
  const FilterDesc wd(dwp);
  ConvDesc cd(p, in.pad_h, in.pad_w, x.dtype());
  const bool f32 = x.dtype() == core::DType::F32;
  const std::string k = key("bwd_filter", xin, dwp, dy, in.pad_h, in.pad_w, p, tf32_);
  auto it = algos_.find(k);
  if (it == algos_.end()) {
    cd.set_math(query_math(x.dtype(), tf32_));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
    int n = 0;
    TESSERA_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        handle_, xd.get(), dyd.get(), cd.get(), wd.get(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
        &n, perf.data()));
    const auto workspace_of = [&](int algo, cudnnMathType_t math, std::size_t* bytes) {
      return cudnnSetConvolutionMathType(cd.get(), math) == CUDNN_STATUS_SUCCESS &&
             cudnnGetConvolutionBackwardFilterWorkspaceSize(
                 handle_, xd.get(), dyd.get(), cd.get(), wd.get(),
                 static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes) == CUDNN_STATUS_SUCCESS;
    };
    it = algos_.emplace(k, pick("conv2d_backward_weight", perf, n, f32, tf32_, workspace_of)).first;
  }
  const Choice& c = it->second;
  cd.set_math(c.math);
  const Tensor wsb = ws.bytes(c.workspace);
  const Scalars s(x.dtype(), 1.0, direct_dw && accumulate ? 1.0 : 0.0);
  TESSERA_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      handle_, s.alpha(), xd.get(), xin.raw_data(), dyd.get(), dy.raw_data(), cd.get(),
      static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo),
      wsb.defined() ? wsb.raw_data() : nullptr, c.workspace, s.beta(), wd.get(), dwp.raw_data()));
  if (!direct_dw) {
    if (accumulate)
      tensor_add(ws.memory(), dw, dwp);
    else if (dw.dtype() == dwp.dtype())
      tensor_copy(ws.memory(), dw, dwp);
    else
      tensor_convert(ws.memory(), dw, dwp);
  }
  if (db) {
    // cuDNN's bias gradient is of dy's dtype: an f32 db of a bf16/f16 call gets it in scratch,
    // widened into (added to) db.
    const bool direct_db = db->dtype() == dy.dtype();
    const Tensor dbt = direct_db ? *db : ws.tensor({db->size(0)}, dy.dtype());
    const Tensor dbview =
        Tensor::from_blob(dbt.raw_data(), {1, dbt.size(0), 1, 1}, dbt.dtype(), nullptr,
                          {dbt.size(0) * dbt.stride(0), dbt.stride(0), 1, 1});
    const TensorDesc dbd(dbview);
    const Scalars sb(x.dtype(), 1.0, accumulate && direct_db ? 1.0 : 0.0);
    TESSERA_CUDNN_CHECK(cudnnConvolutionBackwardBias(handle_, sb.alpha(), dyd.get(), dy.raw_data(),
                                                     sb.beta(), dbd.get(), dbview.raw_data()));
    if (!direct_db) {
      if (accumulate)
        tensor_add(ws.memory(), *db, dbt);
      else
        tensor_convert(ws.memory(), *db, dbt);
    }
  }
}

}  // namespace tessera::compute::cuda
