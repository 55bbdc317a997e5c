// ConvSpec validation and the output-size / input-range formulas.
#include "tessera/nn/conv_spec.hpp"

#include <algorithm>
#include <sstream>

#include "tessera/core/error.hpp"

namespace tessera::nn {

ConvSpec ConvSpec::square(std::int64_t in_channels, std::int64_t out_channels, int k, int stride,
                          int pad, int dilation, int groups, bool bias) {
  ConvSpec s;
  s.in_channels = in_channels;
  s.out_channels = out_channels;
  s.kernel_h = s.kernel_w = k;
  s.stride_h = s.stride_w = stride;
  s.pad_h = s.pad_w = pad;
  s.dilation_h = s.dilation_w = dilation;
  s.groups = groups;
  s.bias = bias;
  return s;
}

void ConvSpec::validate() const {
  TESSERA_CHECK(kernel_h > 0 && kernel_w > 0, describe(), ": kernel size must be positive");
  TESSERA_CHECK(stride_h > 0 && stride_w > 0, describe(), ": stride must be positive");
  TESSERA_CHECK(dilation_h > 0 && dilation_w > 0, describe(), ": dilation must be positive");
  TESSERA_CHECK(pad_h >= 0 && pad_w >= 0, describe(), ": padding must not be negative");
  TESSERA_CHECK(groups > 0, describe(), ": groups must be positive");
  TESSERA_CHECK(in_channels > 0 && out_channels > 0, describe(), ": channel counts must be positive");
  TESSERA_CHECK(in_channels % groups == 0, describe(), ": ", in_channels,
                " input channels are not divisible by groups=", groups,
                "; use a group count that divides both channel counts");
  TESSERA_CHECK(out_channels % groups == 0, describe(), ": ", out_channels,
                " output channels are not divisible by groups=", groups,
                "; use a group count that divides both channel counts");
}

core::Shape ConvSpec::weight_shape() const {
  return {out_channels, in_channels / groups, kernel_h, kernel_w};
}

core::Shape ConvSpec::output_shape(const core::Shape& in) const {
  validate();
  TESSERA_CHECK(in.size() == 4, describe(), ": input shape ", core::shape_str(in),
                " must be 4-d (N,C,H,W)");
  TESSERA_CHECK(in[1] == in_channels, describe(), ": the input ", core::shape_str(in), " has ",
                in[1], " channels but the convolution expects ", in_channels);
  const std::int64_t ho = conv_output_size(in[2], conv_dim_h(*this));
  const std::int64_t wo = conv_output_size(in[3], conv_dim_w(*this));
  TESSERA_CHECK(ho > 0, describe(), ": the kernel spans ", conv_dim_h(*this).span(),
                " rows but the padded input has only ", in[2] + 2 * pad_h,
                " (H=", in[2], ", padding ", pad_h, "); use a larger input or more padding");
  TESSERA_CHECK(wo > 0, describe(), ": the kernel spans ", conv_dim_w(*this).span(),
                " columns but the padded input has only ", in[3] + 2 * pad_w,
                " (W=", in[3], ", padding ", pad_w, "); use a larger input or more padding");
  return {in[0], out_channels, ho, wo};
}

compute::Conv2dParams ConvSpec::params() const {
  compute::Conv2dParams p;
  p.kernel_h = kernel_h;
  p.kernel_w = kernel_w;
  p.stride_h = stride_h;
  p.stride_w = stride_w;
  p.pad_h = pad_h;
  p.pad_w = pad_w;
  p.dilation_h = dilation_h;
  p.dilation_w = dilation_w;
  p.groups = groups;
  return p;
}

std::string ConvSpec::describe() const {
  std::ostringstream os;
  os << "conv " << kernel_h << "x" << kernel_w << "/s" << stride_h;
  if (stride_w != stride_h) os << "x" << stride_w;
  os << "/p" << pad_h;
  if (pad_w != pad_h) os << "x" << pad_w;
  if (dilation_h != 1 || dilation_w != 1) os << "/d" << dilation_h << (dilation_w != dilation_h ? "x" + std::to_string(dilation_w) : "");
  if (groups != 1) os << " g" << groups;
  os << " " << in_channels << "->" << out_channels;
  return os.str();
}

ConvDim conv_dim_h(const ConvSpec& s) { return {s.kernel_h, s.stride_h, s.pad_h, s.dilation_h}; }
ConvDim conv_dim_w(const ConvSpec& s) { return {s.kernel_w, s.stride_w, s.pad_w, s.dilation_w}; }

std::int64_t conv_output_size(std::int64_t in, const ConvDim& d) {
  const std::int64_t num = in + 2 * std::int64_t(d.pad) - d.span();
  if (num < 0) return 0;
  return num / d.stride + 1;
}

core::Range conv_input_range(const core::Range& out, const ConvDim& d) {
  if (out.empty()) return {0, 0};
  return {out.begin * d.stride - d.pad, (out.end - 1) * d.stride - d.pad + d.span()};
}

core::Range conv_interior_outputs(const core::Range& out, const core::Range& available,
                                  std::int64_t in_size, const ConvDim& d) {
  // Output o reads [o·s − p, o·s − p + span) ∩ [0, in_size); it is interior when that lies in
  // `available`. Both bounds are monotone in o, so the interior is a contiguous range.
  auto fits = [&](std::int64_t o) {
    core::Range need = conv_input_range({o, o + 1}, d).intersect({0, in_size});
    return available.contains(need);
  };
  std::int64_t lo = out.begin, hi = out.end;
  while (lo < hi && !fits(lo)) ++lo;
  while (hi > lo && !fits(hi - 1)) --hi;
  return {lo, hi};
}

}  // namespace tessera::nn
