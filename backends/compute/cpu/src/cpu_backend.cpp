// CpuBackend: argument checks, layout handling and the choice of kernel per call.
#include "tessera/compute/cpu.hpp"

#include <type_traits>

#include "conv_depthwise.hpp"
#include "conv_generic.hpp"
#include "conv_im2col.hpp"
#include "conv_onednn.hpp"
#include "conv_pointwise.hpp"
#include "tensor_access.hpp"
#include "tessera/core/error.hpp"

namespace tessera::compute::cpu {

using core::DType;
using core::Tensor;

std::string_view conv_algo_name(ConvAlgo a) noexcept {
  switch (a) {
    case ConvAlgo::Auto:
      return "auto";
    case ConvAlgo::Generic:
      return "generic";
    case ConvAlgo::Depthwise:
      return "depthwise";
    case ConvAlgo::Pointwise:
      return "pointwise";
    case ConvAlgo::Im2col:
      return "im2col";
    case ConvAlgo::Onednn:
      return "onednn";
  }
  return "?";
}

CpuBackend::CpuBackend(int num_threads) : num_threads_(1) { set_num_threads(num_threads); }

CpuBackend::~CpuBackend() = default;

void CpuBackend::set_num_threads(int n) {
  TESSERA_CHECK(n >= 1, "cpu backend: num_threads ", n, " must be at least 1");
  if (n != num_threads_) pool_.reset();
  num_threads_ = n;
}

ThreadPool& CpuBackend::pool() {
  if (!pool_) pool_ = std::make_unique<ThreadPool>(num_threads_);
  return *pool_;
}

OnednnCache& CpuBackend::onednn() {
  if (!onednn_) onednn_ = std::make_unique<OnednnCache>();
  return *onednn_;
}

Capabilities CpuBackend::capabilities() const noexcept {
  Capabilities c;
  c.rounds_master_to_call_dtype =
      onednn_info().bf16 && (algo_ == ConvAlgo::Auto || algo_ == ConvAlgo::Onednn);
  return c;
}

namespace {

ConvAlgo pick(const Conv2dParams& p, const ConvDims& d, DType t) {
  if (depthwise_applies(p, d)) return ConvAlgo::Depthwise;
  if (onednn_applies(p, d, t)) return ConvAlgo::Onednn;
  if (pointwise_applies(p, d)) return ConvAlgo::Pointwise;
  return ConvAlgo::Im2col;
}

// The algorithm for this call: the forced one (checked) or Auto's pick. Empty tensors go to the
// generic loops, which handle every degenerate extent.
ConvAlgo resolve(ConvAlgo forced, const char* what, const Conv2dParams& p, const ConvDims& d,
                 DType t) {
  const char* needs = nullptr;
  if (forced == ConvAlgo::Onednn && !onednn_applies(p, d, t))
    needs =
        !pointwise_applies(p, d) && !patchify_applies(p, d)
            ? "a 1x1 kernel, stride 1, no padding and an output the size of the input, or a kernel "
              "equal to its "
              "stride without padding or dilation (patchify)"
        : !onednn_info().built ? "a build with oneDNN (libdnnl-dev, TESSERA_WITH_ONEDNN)"
        : onednn_info().impl_f32.empty()
            ? "the oneDNN path, which TESSERA_CPU_ONEDNN=0 switched off for this process"
            : "dtype f32, or bf16 on a CPU with bf16 instructions (tessera backends says which)";
  if (forced == ConvAlgo::Depthwise && !depthwise_applies(p, d))
    needs = "groups == input channels == output channels";
  if (forced == ConvAlgo::Pointwise && !pointwise_applies(p, d))
    needs = "a 1x1 kernel, stride 1, no padding and an output the size of the input";
  if (needs)
    throw InvalidArgument(tessera::detail::cat(
        "cpu ", what, ": algorithm '", conv_algo_name(forced), "' does not apply to kernel ",
        p.kernel_h, "x", p.kernel_w, ", stride ", p.stride_h, "x", p.stride_w, ", pad ", p.pad_h,
        "x", p.pad_w, ", groups ", p.groups, " with input (", d.n, ",", d.cin, ",", d.h, ",", d.w,
        ") and output (", d.n, ",", d.cout, ",", d.ho, ",", d.wo, "): it needs ", needs,
        "; force another algorithm or use ConvAlgo::Auto"));
  if (std::int64_t(d.n) * d.cin * d.h * d.w * d.cout * d.ho * d.wo == 0) return ConvAlgo::Generic;
  return forced == ConvAlgo::Auto ? pick(p, d, t) : forced;
}

void check_dtype(const char* what, DType t) {
  if (!core::dtype_is_float(t))
    throw Unsupported(tessera::detail::cat("cpu ", what, ": dtype ", core::dtype_name(t),
                                           " is not supported (f32 and f64 are; bf16/f16 calls through CpuBackend::execute "
                                           "compute in f32)"));
}

// Calls body(T{}) with T = float or double for the call's dtype.
template <class Body>
void dispatch(DType t, Body&& body) {
  if (t == DType::F32)
    body(0.0f);
  else
    body(0.0);
}

}  // namespace

ConvAlgo CpuBackend::pick_conv_algo(const Conv2dParams& p, const Tensor& x, const Tensor& w) {
  ConvDims d = dims_of(x, w);
  d.ho = (d.h + 2 * p.pad_h - p.dilation_h * (p.kernel_h - 1) - 1) / p.stride_h + 1;
  d.wo = (d.w + 2 * p.pad_w - p.dilation_w * (p.kernel_w - 1) - 1) / p.stride_w + 1;
  return pick(p, d, x.dtype());
}

ConvAlgo CpuBackend::pick_conv_algo(const Conv2dParams& p, const Tensor& x, const Tensor& w,
                                    const Tensor& y) {
  return pick(p, dims_of(x, w, y), x.dtype());
}

void CpuBackend::conv2d_forward(const Conv2dParams& p, const Tensor& x, const Tensor& w,
                                const Tensor* bias, Tensor& y) {
  check_conv2d_shapes("conv2d_forward", p, x, w, bias, y);
  check_dtype("conv2d_forward", x.dtype());
  const ConvDims d = dims_of(x, w, y);
  const ConvAlgo algo = resolve(algo_, "conv2d_forward", p, d, x.dtype());
  const Layout lay = layout_of(algo);
  const Tensor xc = input_as(x, lay.x), wc = input_as(w, Need::Contiguous);
  const Tensor bc = (bias && bias->defined()) ? input_as(*bias, Need::Contiguous) : Tensor();
  OutputBuffer out(y, lay.y, false);
  const ConvContext ctx{p, d, pool(), x.allocator()};
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* wp = wc.data<T>();
    const T* bp = bc.defined() ? bc.data<T>() : nullptr;
    switch (algo) {
      case ConvAlgo::Depthwise:
        return depthwise_forward<T>(ctx, cview<T>(xc), wp, bp, view<T>(out.target()));
      case ConvAlgo::Pointwise:
        return pointwise_forward<T>(ctx, cview<T>(xc), wp, bp, view<T>(out.target()));
      case ConvAlgo::Onednn:
        if constexpr (std::is_same_v<T, float>) {
          if (pointwise_applies(p, d))
            return onednn_pointwise_forward<float>(ctx, onednn(), cview<T>(xc), wp, bp,
                                                   view<T>(out.target()));
          return onednn_patch_forward<float>(ctx, onednn(), cview<T>(xc), wp, bp,
                                             view<T>(out.target()));
        }
        return;
      case ConvAlgo::Im2col:
        return im2col_forward<T>(ctx, cview<T>(xc), wp, bp, view<T>(out.target()));
      default:
        return conv2d_forward_generic<T>(p, xc.data<T>(), wp, bp, out.target().data<T>(), d.n,
                                         d.cin, d.h, d.w, d.cout, d.ho, d.wo);
    }
  });
  out.commit();
}

void CpuBackend::conv2d_backward_data(const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                                      Tensor& dx, bool accumulate) {
  check_conv2d_shapes("conv2d_backward_data", p, dx, w, nullptr, dy);
  check_dtype("conv2d_backward_data", dy.dtype());
  const ConvDims d = dims_of(dx, w, dy);
  const ConvAlgo algo = resolve(algo_, "conv2d_backward_data", p, d, dy.dtype());
  const Layout lay = layout_of(algo);
  const Tensor dyc = input_as(dy, lay.y), wc = input_as(w, Need::Contiguous);
  OutputBuffer out(dx, lay.x, accumulate);
  const ConvContext ctx{p, d, pool(), dy.allocator()};
  dispatch(dy.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* wp = wc.data<T>();
    switch (algo) {
      case ConvAlgo::Depthwise:
        return depthwise_backward_data<T>(ctx, cview<T>(dyc), wp, view<T>(out.target()),
                                          accumulate);
      case ConvAlgo::Pointwise:
        return pointwise_backward_data<T>(ctx, cview<T>(dyc), wp, view<T>(out.target()),
                                          accumulate);
      case ConvAlgo::Onednn:
        if constexpr (std::is_same_v<T, float>) {
          if (pointwise_applies(p, d))
            return onednn_pointwise_backward_data<float>(ctx, onednn(), cview<T>(dyc), wp,
                                                         view<T>(out.target()), accumulate);
          return onednn_patch_backward_data<float>(ctx, onednn(), cview<T>(dyc), wp,
                                                   view<T>(out.target()), accumulate);
        }
        return;
      case ConvAlgo::Im2col:
        return im2col_backward_data<T>(ctx, cview<T>(dyc), wp, view<T>(out.target()), accumulate);
      default:
        return conv2d_backward_data_generic<T>(p, dyc.data<T>(), wp, out.target().data<T>(), d.n,
                                               d.cin, d.h, d.w, d.cout, d.ho, d.wo, accumulate);
    }
  });
  out.commit();
}

void CpuBackend::conv2d_backward_weight(const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                                        Tensor& dw, Tensor* db, bool accumulate) {
  check_conv2d_shapes("conv2d_backward_weight", p, x, dw, db, dy);
  check_dtype("conv2d_backward_weight", x.dtype());
  const ConvDims d = dims_of(x, dw, dy);
  const ConvAlgo algo = resolve(algo_, "conv2d_backward_weight", p, d, x.dtype());
  const Layout lay = layout_of(algo);
  const Tensor xc = input_as(x, lay.x), dyc = input_as(dy, lay.y);
  OutputBuffer wout(dw, Need::Contiguous, accumulate);
  Tensor* dbt = (db && db->defined()) ? db : nullptr;
  std::optional<OutputBuffer> bout;
  if (dbt) bout.emplace(*dbt, Need::Contiguous, accumulate);
  const ConvContext ctx{p, d, pool(), x.allocator()};
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* dwp = wout.target().data<T>();
    T* dbp = bout ? bout->target().data<T>() : nullptr;
    switch (algo) {
      case ConvAlgo::Depthwise:
        return depthwise_backward_weight<T>(ctx, cview<T>(xc), cview<T>(dyc), dwp, dbp, accumulate);
      case ConvAlgo::Pointwise:
        return pointwise_backward_weight<T>(ctx, cview<T>(xc), cview<T>(dyc), dwp, dbp, accumulate);
      case ConvAlgo::Onednn:
        if constexpr (std::is_same_v<T, float>) {
          if (pointwise_applies(p, d))
            return onednn_pointwise_backward_weight<float>(ctx, onednn(), cview<T>(xc),
                                                           cview<T>(dyc), dwp, dbp, accumulate);
          return onednn_patch_backward_weight<float>(ctx, onednn(), cview<T>(xc), cview<T>(dyc),
                                                     dwp, dbp, accumulate);
        }
        return;
      case ConvAlgo::Im2col:
        return im2col_backward_weight<T>(ctx, cview<T>(xc), cview<T>(dyc), dwp, dbp, accumulate);
      default:
        return conv2d_backward_weight_generic<T>(p, xc.data<T>(), dyc.data<T>(), dwp, dbp, d.n,
                                                 d.cin, d.h, d.w, d.cout, d.ho, d.wo, accumulate);
    }
  });
  wout.commit();
  if (bout) bout->commit();
}

std::unique_ptr<compute::Backend> create(const BackendOptions& options) {
  return std::make_unique<CpuBackend>(options.num_threads);
}

}  // namespace tessera::compute::cpu
