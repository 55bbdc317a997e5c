// The compute seam: kernels a compute backend (cpu, cuda) provides to core's ops.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/device.hpp"
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

struct OpCall;

/// What a backend's arithmetic does where it departs from the op table's definition of a 16-bit
/// call (16-bit storage, every operand as given, f32 accumulation, each output rounded once:
/// docs/training.md, "Mixed precision"). The conformance suite bounds each backend by the error
/// of what it declares here (tests/compute/README.md), so a backend declares what it really does
/// and nothing more; the default, all false, is the definition (the cpu backend).
struct Capabilities {
  /// In a bf16/f16 call of conv2d_forward, conv2d_backward_data, linear_forward or
  /// linear_backward whose Master tensors are f32: the f32 weight and bias are rounded to the
  /// call's dtype before they are used (16-bit tensor cores take every operand in 16 bits, as
  /// PyTorch AMP's autocast does), and conv2d_backward_weight's f32 dw and db are computed in the
  /// call's dtype, rounded once, then widened into (with accumulate: added in f32 to) the f32
  /// tensors. linear_backward's f32 dw and db are computed in f32 either way. The cuda backend
  /// (cuDNN, cuBLAS: backends/compute/cuda/README.md).
  bool rounds_master_to_call_dtype = false;
};

/// Kernels on tensors of one memory space, reached through execute() (the typed entry points in
/// compute/ops.hpp check arguments, then call it). Inputs and outputs may be strided views.
/// Float dtypes f32 and f64; all tensors of a call share one dtype unless the op says otherwise.
/// A dtype or op the backend lacks throws Unsupported. One Backend object serves one rank; calls
/// may use up to num_threads() threads.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const noexcept = 0;
  virtual int num_threads() const noexcept = 0;
  virtual void set_num_threads(int n) = 0;

  /// Runs one kernel (see compute/ops.hpp for the operations and their typed entry points, which
  /// check arguments before calling this). Throws Unsupported for an operation the backend lacks.
  virtual void execute(const OpCall& call) = 0;

  /// What this backend's arithmetic does beyond the op table's definition (a decorator forwards
  /// its inner backend's).
  virtual Capabilities capabilities() const noexcept { return {}; }

  /// Optional: names the layer the next calls belong to (tracing decorators use it).
  virtual void set_scope(std::string_view) {}

  /// The memory this backend computes on: null for host memory (cpu), else its device memory.
  /// Tensors for this backend are allocated on it (core::Allocator(name, device_memory())).
  virtual std::shared_ptr<core::DeviceMemory> device_memory() { return nullptr; }
  /// Waits until every kernel issued so far has finished (a no-op for synchronous backends).
  virtual void synchronize() {}
};

struct BackendOptions {
  int num_threads = 1;   ///< host threads a call may use
  int device = 0;        ///< device index, for backends that compute on a device
  bool tf32 = false;     ///< let fp32 convolutions and matrix products use TF32 tensor cores
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
