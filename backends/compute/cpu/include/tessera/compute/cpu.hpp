// The `cpu` compute backend: readable reference kernels plus fast paths (Eigen GEMM, depthwise).
#pragma once

#include <memory>
#include <string_view>

#include "tessera/compute/backend.hpp"

namespace tessera::compute::cpu {

/// Which convolution implementation to use. Auto picks the fastest that applies; the others force
/// one path (tests check every path against the float64 reference; a forced path that does not
/// apply to the given geometry throws InvalidArgument).
///  - Generic: direct loops over the definition, single-threaded (the readable reference).
///  - Depthwise: groups == Cin == Cout, any kernel, stride, dilation and padding.
///  - Pointwise: 1×1 kernel, stride 1, no padding, output the size of the input; any groups.
///  - Im2col: any geometry (im2col/col2im + Eigen GEMM per group).
enum class ConvAlgo { Auto, Generic, Depthwise, Pointwise, Im2col };
std::string_view conv_algo_name(ConvAlgo a) noexcept;

class ThreadPool;

/// Kernels on host memory in f32 and f64 — and in bf16/f16 through execute(), which widens a
/// 16-bit call to f32 workspace, runs the f32 kernel and rounds the outputs once — using up to
/// num_threads() threads per call (a pool of
/// num_threads() − 1 workers owned by this object and started on first use; one thread starts
/// none). Results are bit-identical for the same inputs and thread count. Objects share no
/// mutable state, so ranks may call their own backends concurrently.
class CpuBackend final : public compute::Backend {
 public:
  explicit CpuBackend(int num_threads = 1);
  ~CpuBackend() override;
  std::string_view name() const noexcept override { return "cpu"; }
  int num_threads() const noexcept override { return num_threads_; }
  void set_num_threads(int n) override;

  /// Runs any compute op: convolutions through the paths below, the rest through cpu_ops; a
  /// bf16/f16 call in f32 (backends/compute/cpu/README.md, "bf16 and f16").
  void execute(const OpCall& call) override;

  /// The convolutions on f32/f64 tensors (bf16/f16 calls go through execute()).
  void conv2d_forward(const Conv2dParams& p, const core::Tensor& x, const core::Tensor& w,
                      const core::Tensor* bias, core::Tensor& y);
  void conv2d_backward_data(const Conv2dParams& p, const core::Tensor& dy, const core::Tensor& w,
                            core::Tensor& dx, bool accumulate);
  void conv2d_backward_weight(const Conv2dParams& p, const core::Tensor& x, const core::Tensor& dy,
                              core::Tensor& dw, core::Tensor* db, bool accumulate);

  /// Forces one algorithm for the following calls (Auto restores the automatic choice).
  void force_conv_algo(ConvAlgo a) noexcept { algo_ = a; }
  ConvAlgo forced_conv_algo() const noexcept { return algo_; }
  /// The algorithm Auto would pick for this geometry and input shape, assuming the standard
  /// output extent (symmetric padding).
  static ConvAlgo pick_conv_algo(const Conv2dParams& p, const core::Tensor& x,
                                 const core::Tensor& w);
  /// The algorithm Auto picks for this geometry, input and output (y or dy) shape.
  static ConvAlgo pick_conv_algo(const Conv2dParams& p, const core::Tensor& x,
                                 const core::Tensor& w, const core::Tensor& y);

 private:
  ThreadPool& pool();

  int num_threads_;
  ConvAlgo algo_ = ConvAlgo::Auto;
  std::unique_ptr<ThreadPool> pool_;
};

/// Factory for the compute registry.
std::unique_ptr<compute::Backend> create(const BackendOptions& options);

}  // namespace tessera::compute::cpu
