// kernel_class: a compute call's calibration key from its op and geometry.
#include "tessera/sim/kernel_class.hpp"

#include <algorithm>
#include <cstring>

#include "tessera/compute/op_table.hpp"
#include "tessera/core/half.hpp"

namespace tessera::sim {

namespace {

std::string geometry_class(const compute::OpCall& c) {
  using compute::OpKind;
  std::string k(compute::op_name(c.kind));
  switch (c.kind) {
    case OpKind::Conv2dForward:
    case OpKind::Conv2dBackwardData:
    case OpKind::Conv2dBackwardWeight: {
      // The weight is (Cout, Cin/groups, kh, kw).
      const core::Tensor& w = compute::conv_weight(c);
      const compute::Conv2dParams& p = c.conv;
      if (p.groups > 1 && w.ndim() == 4 && w.size(1) == 1) return k + "/depthwise";
      if (p.groups > 1) return k + "/grouped";
      const bool one_by_one = p.kernel_h == 1 && p.kernel_w == 1 && p.stride_h == 1 && p.stride_w == 1 &&
                              p.pad_h == 0 && p.pad_w == 0;
      if (one_by_one) return k + "/pointwise";
      // Non-overlapping windows (ConvNeXt's stem and downsampling): the GEMM reads every input
      // element once, where a k×k window of stride 1 reads it k² times.
      const bool patchify = p.kernel_h == p.stride_h && p.kernel_w == p.stride_w && p.pad_h == 0 && p.pad_w == 0 &&
                            p.dilation_h == 1 && p.dilation_w == 1 && p.kernel_h * p.kernel_w > 1;
      return k + (patchify ? "/patchify" : "/dense");
    }
    case OpKind::ActivationForward:
    case OpKind::ActivationBackward: return k + "/" + std::string(compute::activation_name(c.act));
    default: return k;
  }
}

}  // namespace

std::string kernel_class(const compute::OpCall& c) {
  std::string k = geometry_class(c);
  const core::Tensor* lead = compute::float_lead(c);
  if (lead && core::dtype_is_half(lead->dtype())) k += "@" + std::string(core::dtype_name(lead->dtype()));
  return k;
}

std::string kernel_class_op(const std::string& kernel_class) {
  return kernel_class.substr(0, std::min(kernel_class.find('/'), kernel_class.find('@')));
}

bool is_kernel_class(const std::string& full) {
  using compute::OpKind;
  std::string name = full;
  for (const char* suffix : {"@bf16", "@f16"})
    if (name.size() > std::strlen(suffix) && name.ends_with(suffix)) name.resize(name.size() - std::strlen(suffix));
  const std::string op = kernel_class_op(name);
  for (int i = 0; i < static_cast<int>(OpKind::kCount); ++i) {
    const auto kind = static_cast<OpKind>(i);
    if (compute::op_name(kind) != op) continue;
    if (op.size() == name.size()) return true;
    const std::string variant = name.substr(op.size() + 1);
    switch (kind) {
      case OpKind::Conv2dForward:
      case OpKind::Conv2dBackwardData:
      case OpKind::Conv2dBackwardWeight:
        return variant == "depthwise" || variant == "pointwise" || variant == "grouped" || variant == "patchify" ||
               variant == "dense";
      case OpKind::ActivationForward:
      case OpKind::ActivationBackward: return variant == "relu" || variant == "gelu" || variant == "sigmoid";
      default: return false;
    }
  }
  return false;
}

}  // namespace tessera::sim
