// Which kernels the cpu compute backend runs on this build and CPU: its oneDNN path (version, the
// ISA oneDNN dispatches to, the implementation per dtype, or why not) and, per class of
// convolution, the path Auto takes in each dtype. `tessera backends` and the CPU benchmarks show
// it.
#pragma once

#include <string>
#include <vector>

namespace tessera::run {

/// The cpu backend's oneDNN path (1x1 and patchify convolutions), from compute::cpu::onednn_info().
struct OnednnPath {
  bool built = false;       ///< this tessera was built with oneDNN
  std::string version;      ///< oneDNN's version, "2.6.3"; "" where not built
  std::string isa;          ///< the ISA oneDNN dispatches to on this CPU, "avx512_core_bf16"
  bool f32 = false;         ///< f32 pointwise convolutions run on oneDNN under Auto
  bool bf16 = false;        ///< bf16 ones do, on the CPU's bf16 instructions
  std::string impl_f32;     ///< oneDNN's name for the f32 implementation, "gemm:jit"; "" where none
  std::string impl_bf16;    ///< the same for bf16
  std::string why_not_f32;  ///< where f32 does not run on oneDNN: why, in words
  std::string why_not_bf16;  ///< where bf16 does not: why (16-bit calls then compute in f32)

  /// One line: "oneDNN 2.6.3, ISA avx512_core_bf16, pointwise f32 gemm:jit, bf16 gemm:jit", or
  /// what does not run and why.
  std::string summary() const;
  /// One JSON object with the fields above.
  std::string to_json() const;
};

/// The path Auto takes for one class of convolution, per dtype.
struct ConvPaths {
  std::string conv_class;  ///< "pointwise", "patchify", "depthwise", "dense/strided"
  std::string f32, bf16, f16, f64;
};

/// What the cpu compute backend runs here.
struct CpuKernels {
  OnednnPath onednn;
  std::vector<ConvPaths> conv;  ///< pointwise (1x1, stride 1, no pad), patchify (kernel == stride),
                                ///< depthwise, the rest
  std::string other_ops;        ///< every op but the convolutions

  /// The lines `tessera backends` prints under the cpu backend, each starting with `indent`.
  std::string to_text(const std::string& indent) const;
  /// {"onednn": {...}, "conv_paths": {"pointwise": {"f32": ..., ...}, ...}, "other_ops": ...}.
  std::string to_json() const;
};

/// Asks the cpu backend once per process (it probes oneDNN by creating one primitive per dtype).
CpuKernels cpu_kernels();

}  // namespace tessera::run
