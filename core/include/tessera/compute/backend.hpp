// The compute seam: kernels a compute backend (cpu, cuda) provides to core's ops.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/tensor.hpp"

namespace tessera::compute {

/// Geometry of one 2-D convolution kernel call (NCHW).
///
/// y[n, co, oh, ow] = bias[co] + Σ_{ci in co's group, i < kernel_h, j < kernel_w}
///     w[co, ci - g0, i, j] · x[n, ci, oh·stride_h − pad_h + i·dilation_h, ow·stride_w − pad_w + j·dilation_w]
///
/// where an x index outside [0, H) × [0, W) reads as zero. The output extent is whatever y's shape
/// says, so a caller may compute any window of outputs (pad_h/pad_w say where output row/column 0
/// sits); implicit zero rows/columns past the end are the "bottom/right padding".
struct Conv2dParams {
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;
};

/// Kernels on tensors of one memory space. Shapes: x (N,Cin,H,W), w (Cout,Cin/groups,kh,kw),
/// bias (Cout), y/dy (N,Cout,Ho,Wo). Inputs may be strided views; outputs may be strided views
/// (written element by element through their strides). Float dtypes f32 and f64; all tensors of a
/// call share one dtype. Shape errors throw InvalidArgument; a dtype the backend lacks throws
/// Unsupported. One Backend object serves one rank; calls may use up to num_threads() threads.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const noexcept = 0;
  virtual int num_threads() const noexcept = 0;
  virtual void set_num_threads(int n) = 0;

  /// y = conv(x, w) + bias (bias may be null). Overwrites y.
  virtual void conv2d_forward(const Conv2dParams& p, const core::Tensor& x, const core::Tensor& w,
                              const core::Tensor* bias, core::Tensor& y) = 0;
  /// dx = ∂⟨y, dy⟩/∂x: the adjoint of conv2d_forward in x. Overwrites dx (or adds when accumulate).
  virtual void conv2d_backward_data(const Conv2dParams& p, const core::Tensor& dy,
                                    const core::Tensor& w, core::Tensor& dx, bool accumulate) = 0;
  /// dw = ∂⟨y, dy⟩/∂w and db = Σ dy over (n, oh, ow) (db may be null). Overwrites or adds.
  virtual void conv2d_backward_weight(const Conv2dParams& p, const core::Tensor& x,
                                      const core::Tensor& dy, core::Tensor& dw, core::Tensor* db,
                                      bool accumulate) = 0;
};

struct BackendOptions {
  int num_threads = 1;
};

using BackendFactory = std::function<std::unique_ptr<Backend>(const BackendOptions&)>;

/// Compute backends by name ("cpu", "cuda"); filled by tessera::register_builtin_backends.
class Registry {
 public:
  void add(std::string name, BackendFactory factory);
  /// Throws InvalidArgument naming the available backends for an unknown name.
  std::unique_ptr<Backend> create(std::string_view name, const BackendOptions& options) const;
  bool contains(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, BackendFactory, std::less<>> entries_;
};

/// Checks shapes and dtypes of a conv2d call against `p`; throws InvalidArgument naming `what`
/// (e.g. "conv2d_forward") and the offending tensor. Backends call it first.
void check_conv2d_shapes(const char* what, const Conv2dParams& p, const core::Tensor& x,
                         const core::Tensor& w, const core::Tensor* bias, const core::Tensor& y);

}  // namespace tessera::compute
