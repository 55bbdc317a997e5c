// How each convolution path needs its tensors laid out, and the copies that provide it.
#pragma once

#include <optional>

#include "conv_common.hpp"
#include "tessera/compute/cpu.hpp"

namespace tessera::compute::cpu {

/// What a kernel needs of a tensor's strides.
enum class Need {
  UnitW,       ///< unit W stride (any N, C, H strides): rows are contiguous
  Planes,      ///< unit W stride and H stride == W: each (n, c) plane is contiguous
  Contiguous,  ///< dense row-major
};

/// Needs of the input-side (x, dx) and output-side (y, dy) tensors of one algorithm.
struct Layout {
  Need x, y;
};

/// Generic: both contiguous; Depthwise: rows; Pointwise: planes (GEMM operands); Im2col: rows
/// of x, planes of y.
inline Layout layout_of(ConvAlgo a) {
  switch (a) {
    case ConvAlgo::Depthwise:
      return {Need::UnitW, Need::UnitW};
    case ConvAlgo::Pointwise:
    case ConvAlgo::Onednn:
      return {Need::Planes, Need::Planes};
    case ConvAlgo::Im2col:
      return {Need::UnitW, Need::Planes};
    default:
      return {Need::Contiguous, Need::Contiguous};
  }
}

/// True when tensor t (4-d, or 1-d for Contiguous) meets the need.
inline bool meets(const core::Tensor& t, Need need) {
  if (need == Need::Contiguous || t.ndim() != 4) return t.is_contiguous();
  const bool unit_w = t.stride(3) == 1 || t.size(3) <= 1;
  if (need == Need::UnitW) return unit_w;
  return unit_w && (t.stride(2) == t.size(3) || t.size(2) <= 1);
}

/// t itself when it meets the need, else a contiguous copy booked as Workspace.
inline core::Tensor input_as(const core::Tensor& t, Need need) {
  return meets(t, need) ? t : t.clone(core::MemCategory::Workspace);
}

/// An output written directly when it meets the need, else through a contiguous Workspace copy
/// (holding the old values when the kernel accumulates) that commit() copies back.
class OutputBuffer {
 public:
  OutputBuffer(core::Tensor& dst, Need need, bool keep_old) : dst_(dst) {
    if (!meets(dst, need)) {
      tmp_ = core::Tensor::empty(dst.shape(), dst.dtype(), core::MemCategory::Workspace,
                                 dst.allocator());
      if (keep_old) tmp_.copy_from(dst);
    }
  }
  core::Tensor& target() { return tmp_.defined() ? tmp_ : dst_; }
  void commit() {
    if (tmp_.defined()) dst_.copy_from(tmp_);
  }

 private:
  core::Tensor& dst_;
  core::Tensor tmp_;
};

/// Sizes of a call: x (N,Cin,H,W), w (Cout,..), y (N,Cout,Ho,Wo); without y, Ho = Wo = 0.
inline ConvDims dims_of(const core::Tensor& x, const core::Tensor& w) {
  return {int(x.size(0)), int(x.size(1)), int(x.size(2)), int(x.size(3)), int(w.size(0)), 0, 0};
}
inline ConvDims dims_of(const core::Tensor& x, const core::Tensor& w, const core::Tensor& y) {
  ConvDims d = dims_of(x, w);
  d.ho = int(y.size(2));
  d.wo = int(y.size(3));
  return d;
}

/// PlaneView of a 4-d tensor meeting Need::UnitW.
template <class T>
PlaneView<T> view(const core::Tensor& t) {
  return {t.data<T>(), t.stride(0), t.stride(1), t.stride(2)};
}
template <class T>
PlaneView<const T> cview(const core::Tensor& t) {
  return {t.data<T>(), t.stride(0), t.stride(1), t.stride(2)};
}

}  // namespace tessera::compute::cpu
