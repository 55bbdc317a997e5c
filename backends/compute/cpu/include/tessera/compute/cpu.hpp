// The `cpu` compute backend: readable reference kernels plus fast paths (Eigen GEMM, depthwise).
#pragma once

#include <memory>
#include <string_view>

#include "tessera/compute/backend.hpp"

namespace tessera::compute::cpu {

/// Which convolution implementation to use. Auto picks the fastest that applies; the others force
/// one path (tests check every path against the float64 reference; a forced path that does not
/// apply to the given geometry throws InvalidArgument).
enum class ConvAlgo { Auto, Generic, Depthwise, Pointwise, Im2col };
std::string_view conv_algo_name(ConvAlgo a) noexcept;

/// Kernels on host memory in f32 and f64, using up to num_threads() threads per call.
class CpuBackend final : public compute::Backend {
 public:
  explicit CpuBackend(int num_threads = 1);
  std::string_view name() const noexcept override { return "cpu"; }
  int num_threads() const noexcept override { return num_threads_; }
  void set_num_threads(int n) override;

  void conv2d_forward(const Conv2dParams& p, const core::Tensor& x, const core::Tensor& w,
                      const core::Tensor* bias, core::Tensor& y) override;
  void conv2d_backward_data(const Conv2dParams& p, const core::Tensor& dy, const core::Tensor& w,
                            core::Tensor& dx, bool accumulate) override;
  void conv2d_backward_weight(const Conv2dParams& p, const core::Tensor& x, const core::Tensor& dy,
                              core::Tensor& dw, core::Tensor* db, bool accumulate) override;

  void force_conv_algo(ConvAlgo a) noexcept { algo_ = a; }
  ConvAlgo forced_conv_algo() const noexcept { return algo_; }
  /// The algorithm Auto would pick for this geometry and input shape.
  static ConvAlgo pick_conv_algo(const Conv2dParams& p, const core::Tensor& x, const core::Tensor& w);

 private:
  int num_threads_;
  ConvAlgo algo_ = ConvAlgo::Auto;
};

/// Factory for the compute registry.
std::unique_ptr<compute::Backend> create(const BackendOptions& options);

}  // namespace tessera::compute::cpu
