// The linear layer through cuBLAS (see linear_cublas.hpp). A row-major (R,C) matrix with row
// stride ld and unit column stride is, to column-major cuBLAS, its (C,R) transpose with leading
// dimension ld; views with a non-unit column stride are copied to contiguous scratch first.
// bf16/f16 calls: the inputs in 16 bits (an f32 weight rounded into scratch first), products
// accumulated in f32 (CUBLAS_COMPUTE_32F), outputs written in their own dtype: y and dx in the
// call's, dw and db in f32 directly where they are f32 (cuBLAS takes 16-bit A/B with an f32 C).
#include "linear_cublas.hpp"

#include "cuda_check.hpp"
#include "kernel_launch.hpp"
#include "tessera/core/half.hpp"

namespace tessera::compute::cuda {

using core::Tensor;

namespace {

/// A matrix as cuBLAS takes it: a pointer and a leading dimension (the row stride).
struct Mat {
  Tensor t;  // keeps a contiguous copy alive
  void* data = nullptr;
  core::DType dtype = core::DType::F32;
  int ld = 1;
  int rows = 0, cols = 0;
};

int to_int(std::int64_t v, const Tensor& t) {
  TESSERA_CHECK(v <= 0x7fffffff, "cuda linear: ", t.describe(), " is beyond cuBLAS's int sizes");
  return static_cast<int>(v);
}

/// `t` itself when its columns are unit-strided, else a contiguous scratch copy of it.
Mat as_input(const Workspace& ws, const Tensor& t) {
  Mat m;
  m.t = t;
  if (t.size(1) > 1 && t.stride(1) != 1) {
    m.t = ws.tensor(t.shape(), t.dtype());
    tensor_copy(ws.memory(), m.t, t);
  }
  m.data = m.t.raw_data();
  m.dtype = t.dtype();
  m.rows = to_int(t.size(0), t);
  m.cols = to_int(t.size(1), t);
  const std::int64_t ld = m.t.size(0) > 1 ? m.t.stride(0) : m.t.size(1);
  m.ld = to_int(std::max<std::int64_t>(ld, 1), t);
  return m;
}

/// `t` in `dtype`: itself, or (an f32 weight of a bf16/f16 call) rounded into contiguous scratch.
Tensor in_dtype(const Workspace& ws, const Tensor& t, core::DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor c = ws.tensor(t.shape(), dtype);
  tensor_convert(ws.memory(), c, t);
  return c;
}

cudaDataType_t data_type(core::DType t) {
  switch (t) {
    case core::DType::F32:
      return CUDA_R_32F;
    case core::DType::F64:
      return CUDA_R_64F;
    case core::DType::BF16:
      return CUDA_R_16BF;
    case core::DType::F16:
      return CUDA_R_16F;
    default:
      throw Unsupported(detail::cat("cuda linear: ", core::dtype_name(t),
                                    " is not supported (f32, f64, bf16, f16)"));
  }
}

struct Gemm {
  cublasHandle_t h;
  core::DType dtype;
  bool tf32;

  /// Column-major C (m×n, ldc) = alpha·op(A)·op(B) + beta·C. A and B in `dtype`; C in its own
  /// (the same, or f32 when `dtype` is bf16/f16: cublasGemmEx's 16BF/16F × 16BF/16F → 32F).
  void operator()(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const Mat& a,
                  const Mat& b, double beta, const Mat& c) const {
    const cudaDataType_t dt = data_type(dtype);
    TESSERA_ASSERT(
        a.dtype == dtype && b.dtype == dtype &&
            (c.dtype == dtype || (core::dtype_is_half(dtype) && c.dtype == core::DType::F32)),
        "cuda linear: GEMM operand dtypes");
    const bool f64 = dtype == core::DType::F64;
    // 16-bit inputs: f32 accumulation (tensor cores; their products of 16-bit values are exact).
    const cublasComputeType_t ct =
        f64 ? CUBLAS_COMPUTE_64F
            : (tf32 && dtype == core::DType::F32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                 : CUBLAS_COMPUTE_32F);
    const float af = 1.0f, bf = static_cast<float>(beta);
    const double ad = 1.0, bd = beta;
    const void* alpha = f64 ? static_cast<const void*>(&ad) : &af;
    const void* betap = f64 ? static_cast<const void*>(&bd) : &bf;
    TESSERA_CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, alpha, a.data, dt, a.ld, b.data, dt, b.ld,
                                      betap, c.data, data_type(c.dtype), c.ld, ct,
                                      CUBLAS_GEMM_DEFAULT));
  }
};

/// Writes into `out` through `target` (out itself, or scratch when out's columns are strided).
struct Output {
  Mat m;
  Tensor out;
  bool scratch = false;
};
Output as_output(const Workspace& ws, const Tensor& out) {
  Output o;
  o.out = out;
  o.scratch = out.size(1) > 1 && out.stride(1) != 1;
  o.m = o.scratch ? as_input(ws, ws.tensor(out.shape(), out.dtype())) : as_input(ws, out);
  return o;
}
/// Moves a scratch result into `out` (added when `accumulate`).
void finish(const Workspace& ws, const Output& o, bool accumulate) {
  if (!o.scratch) return;
  if (accumulate)
    tensor_add(ws.memory(), o.out, o.m.t);
  else
    tensor_copy(ws.memory(), o.out, o.m.t);
}

}  // namespace

void CublasLinear::forward(const Workspace& ws, const Tensor& x, const Tensor& w,
                           const Tensor* bias, const Tensor& y) {
  if (y.numel() == 0) return;
  const Output yo = as_output(ws, y);
  // y = bias broadcast over rows (a stride-0 view of it), then the product added with beta = 1.
  // An f32 bias of a bf16/f16 call is rounded to y's dtype here, then y = round(x·wᵀ + bias) in
  // cuBLAS's f32 epilogue: PyTorch AMP's linear (the bias cast to the autocast dtype).
  if (bias) {
    const Tensor& yt = yo.m.t;
    const Tensor rows = Tensor::from_blob(bias->raw_data(), yt.shape(), bias->dtype(), nullptr,
                                          {0, bias->stride(0)});
    if (bias->dtype() == yt.dtype())
      tensor_copy(ws.memory(), yt, rows);
    else
      tensor_convert(ws.memory(), yt, rows);
  }
  const double beta = bias ? 1.0 : 0.0;
  if (x.size(1) == 0) {  // K = 0: the product is zero
    if (!bias) tensor_fill(ws.memory(), yo.m.t, 0.0);
  } else {
    const Mat xm = as_input(ws, x), wm = as_input(ws, in_dtype(ws, w, x.dtype()));
    // yᵀ (N×M) = W (N×K, wᵀ's col-major view transposed) · xᵀ (K×M).
    Gemm{handle_, x.dtype(), tf32_}(CUBLAS_OP_T, CUBLAS_OP_N, wm.rows, xm.rows, xm.cols, wm, xm,
                                    beta, yo.m);
  }
  finish(ws, yo, false);
}

void CublasLinear::backward(const Workspace& ws, const Tensor& dy, const Tensor& x, const Tensor& w,
                            const Tensor* dx, const Tensor& dw, const Tensor* db, bool accumulate) {
  const Gemm gemm{handle_, x.dtype(), tf32_};
  const bool empty = dy.numel() == 0;  // M = 0 or N = 0: the products are zero
  const Mat dym = empty ? Mat{} : as_input(ws, dy);
  if (dx && dx->numel() > 0) {
    const Output o = as_output(ws, *dx);
    if (empty) {
      tensor_fill(ws.memory(), o.m.t, 0.0);
    } else {
      // dxᵀ (K×M) = wᵀ (K×N) · dyᵀ (N×M); a dx of the caller is overwritten.
      const Mat wm = as_input(ws, in_dtype(ws, w, x.dtype()));
      gemm(CUBLAS_OP_N, CUBLAS_OP_N, wm.cols, dym.rows, dym.cols, wm, dym, 0.0, o.m);
    }
    finish(ws, o, false);
  }
  if (dw.numel() > 0) {
    const Output o = as_output(ws, dw);
    const bool acc_in_place = accumulate && !o.scratch;
    if (empty) {
      if (!accumulate) tensor_fill(ws.memory(), dw, 0.0);
    } else {
      // dwᵀ (K×N) = xᵀ (K×M) · dy (M×N).
      const Mat xm = as_input(ws, x);
      gemm(CUBLAS_OP_N, CUBLAS_OP_T, xm.cols, dym.cols, dym.rows, xm, dym, acc_in_place ? 1.0 : 0.0,
           o.m);
      finish(ws, o, accumulate);
    }
  }
  if (db && db->numel() > 0) {
    if (empty) {
      if (!accumulate) tensor_fill(ws.memory(), *db, 0.0);
      return;
    }
    // db (N) = dyᵀ (N×M) · ones (M): a GEMM with one column, db as an N×1 matrix of ld N.
    const Tensor ones = ws.tensor({dy.size(0), 1}, dy.dtype());
    tensor_fill(ws.memory(), ones, 1.0);
    Mat onem;
    onem.data = ones.raw_data();
    onem.dtype = ones.dtype();
    onem.ld = dym.rows;
    const bool contiguous_db = db->stride(0) == 1;
    const Tensor target = contiguous_db ? *db : ws.tensor({db->size(0)}, db->dtype());
    Mat dbm;
    dbm.data = target.raw_data();
    dbm.dtype = target.dtype();
    dbm.ld = to_int(std::max<std::int64_t>(db->size(0), 1), *db);
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, dym.cols, 1, dym.rows, dym, onem,
         contiguous_db && accumulate ? 1.0 : 0.0, dbm);
    if (!contiguous_db) {
      if (accumulate)
        tensor_add(ws.memory(), *db, target);
      else
        tensor_copy(ws.memory(), *db, target);
    }
  }
}

}  // namespace tessera::compute::cuda
