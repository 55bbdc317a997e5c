// CpuBackend: argument checks, layout handling and the choice of kernel per call.
#include "tessera/compute/cpu.hpp"

#include "conv_generic.hpp"
#include "tessera/core/error.hpp"

namespace tessera::compute::cpu {

using core::DType;
using core::Tensor;

std::string_view conv_algo_name(ConvAlgo a) noexcept {
  switch (a) {
    case ConvAlgo::Auto: return "auto";
    case ConvAlgo::Generic: return "generic";
    case ConvAlgo::Depthwise: return "depthwise";
    case ConvAlgo::Pointwise: return "pointwise";
    case ConvAlgo::Im2col: return "im2col";
  }
  return "?";
}

CpuBackend::CpuBackend(int num_threads) : num_threads_(1) { set_num_threads(num_threads); }

void CpuBackend::set_num_threads(int n) {
  TESSERA_CHECK(n >= 1, "cpu backend: num_threads ", n, " must be at least 1");
  num_threads_ = n;
}

ConvAlgo CpuBackend::pick_conv_algo(const Conv2dParams&, const Tensor&, const Tensor&) {
  return ConvAlgo::Generic;
}

namespace {

// Output written through a contiguous scratch when the destination is a strided view.
struct OutputBuffer {
  Tensor& dst;
  Tensor tmp;
  explicit OutputBuffer(Tensor& d, bool need_old) : dst(d) {
    if (!d.is_contiguous()) {
      tmp = Tensor::empty(d.shape(), d.dtype(), core::MemCategory::Workspace, d.allocator());
      if (need_old) tmp.copy_from(d);
    }
  }
  Tensor& target() { return tmp.defined() ? tmp : dst; }
  void commit() {
    if (tmp.defined()) dst.copy_from(tmp);
  }
};

void check_dtype(const char* what, DType t) {
  if (!core::dtype_is_float(t))
    throw Unsupported(tessera::detail::cat("cpu ", what, ": dtype ", core::dtype_name(t),
                                           " is not supported (f32 and f64 are)"));
}

}  // namespace

void CpuBackend::conv2d_forward(const Conv2dParams& p, const Tensor& x, const Tensor& w,
                                const Tensor* bias, Tensor& y) {
  check_conv2d_shapes("conv2d_forward", p, x, w, bias, y);
  check_dtype("conv2d_forward", x.dtype());
  const Tensor xc = x.contiguous(), wc = w.contiguous();
  const Tensor bc = (bias && bias->defined()) ? bias->contiguous() : Tensor();
  OutputBuffer out(y, false);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    conv2d_forward_generic<T>(p, xc.data<T>(), wc.data<T>(), bc.defined() ? bc.data<T>() : nullptr,
                              out.target().data<T>(), int(x.size(0)), int(x.size(1)), int(x.size(2)),
                              int(x.size(3)), int(w.size(0)), int(y.size(2)), int(y.size(3)));
  };
  if (x.dtype() == DType::F32) run(0.0f); else run(0.0);
  out.commit();
}

void CpuBackend::conv2d_backward_data(const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                                      Tensor& dx, bool accumulate) {
  check_conv2d_shapes("conv2d_backward_data", p, dx, w, nullptr, dy);
  check_dtype("conv2d_backward_data", dy.dtype());
  const Tensor dyc = dy.contiguous(), wc = w.contiguous();
  OutputBuffer out(dx, accumulate);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    conv2d_backward_data_generic<T>(p, dyc.data<T>(), wc.data<T>(), out.target().data<T>(),
                                    int(dx.size(0)), int(dx.size(1)), int(dx.size(2)), int(dx.size(3)),
                                    int(w.size(0)), int(dy.size(2)), int(dy.size(3)), accumulate);
  };
  if (dy.dtype() == DType::F32) run(0.0f); else run(0.0);
  out.commit();
}

void CpuBackend::conv2d_backward_weight(const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                                        Tensor& dw, Tensor* db, bool accumulate) {
  check_conv2d_shapes("conv2d_backward_weight", p, x, dw, db, dy);
  check_dtype("conv2d_backward_weight", x.dtype());
  const Tensor xc = x.contiguous(), dyc = dy.contiguous();
  OutputBuffer wout(dw, accumulate);
  Tensor* dbt = (db && db->defined()) ? db : nullptr;
  Tensor dbtmp;
  if (dbt && !dbt->is_contiguous()) {
    dbtmp = dbt->clone(core::MemCategory::Workspace);
  }
  auto run = [&](auto zero) {
    using T = decltype(zero);
    T* dbp = dbt ? (dbtmp.defined() ? dbtmp.data<T>() : dbt->data<T>()) : nullptr;
    conv2d_backward_weight_generic<T>(p, xc.data<T>(), dyc.data<T>(), wout.target().data<T>(), dbp,
                                      int(x.size(0)), int(x.size(1)), int(x.size(2)), int(x.size(3)),
                                      int(dw.size(0)), int(dy.size(2)), int(dy.size(3)), accumulate);
  };
  if (x.dtype() == DType::F32) run(0.0f); else run(0.0);
  wout.commit();
  if (dbtmp.defined()) dbt->copy_from(dbtmp);
}

std::unique_ptr<compute::Backend> create(const BackendOptions& options) {
  return std::make_unique<CpuBackend>(options.num_threads);
}

}  // namespace tessera::compute::cpu
