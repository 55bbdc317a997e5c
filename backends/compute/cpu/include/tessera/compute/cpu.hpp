// The `cpu` compute backend: readable reference kernels plus fast paths (Eigen GEMM, depthwise).
#pragma once

#include <memory>
#include <string>
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
///  - Onednn: the pointwise geometry as oneDNN matrix products (f32, and bf16 where the CPU has
///    bf16 instructions); Auto's pick for those calls where onednn_info() says it runs.
enum class ConvAlgo { Auto, Generic, Depthwise, Pointwise, Im2col, Onednn };
std::string_view conv_algo_name(ConvAlgo a) noexcept;

/// What this build and CPU give the oneDNN path (backends/compute/cpu/README.md, "oneDNN").
struct OnednnInfo {
  bool built = false;         ///< compiled with oneDNN (TESSERA_WITH_ONEDNN)
  bool switched_off = false;  ///< built, but TESSERA_CPU_ONEDNN=0 switched it off for this process
  std::string version;        ///< oneDNN's version, "2.6.3"
  std::string isa;            ///< the ISA oneDNN dispatches to on this CPU: "avx512_core_bf16",
                              ///< "avx512_core_amx", "avx2", ...
  bool bf16 =
      false;  ///< bf16 matrix products run on the CPU's bf16 instructions (AVX512_BF16 or AMX-BF16)
  std::string impl_f32;  ///< oneDNN's name for the implementation of an f32 / bf16 pointwise block
                         ///< ("gemm:jit"); "" where none runs
  std::string impl_bf16;
  std::string why_not_bf16;  ///< where bf16 does not run through oneDNN: why, in words
};
/// Probed once per process (creates one primitive per dtype).
const OnednnInfo& onednn_info();
/// True when a call of this dtype with the pointwise geometry runs through oneDNN under Auto.
bool onednn_runs(core::DType t);

class ThreadPool;
class OnednnCache;

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
  /// rounds_master_to_call_dtype where bf16 convolutions run through oneDNN (it takes every
  /// operand of a bf16 product in bf16, as autocast does).
  Capabilities capabilities() const noexcept override;

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
  OnednnCache& onednn();

  int num_threads_;
  ConvAlgo algo_ = ConvAlgo::Auto;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<OnednnCache> onednn_;  // this backend's oneDNN primitives, by geometry
};

/// Factory for the compute registry.
std::unique_ptr<compute::Backend> create(const BackendOptions& options);

}  // namespace tessera::compute::cpu
