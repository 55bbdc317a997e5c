// The kernels the cpu compute backend runs here (run::cpu_kernels()), as the header line and the
// "onednn" JSON object of every CPU benchmark, so that a figure says which kernels produced it.
#pragma once

#include <string>

#include "tessera/run/cpu_kernels.hpp"

namespace tessera::bench {

/// "cpu kernels: oneDNN 2.6.3, ISA avx512_core_bf16, pointwise f32 gemm:jit, bf16 gemm:jit", or
/// what does not run on oneDNN and why.
inline std::string cpu_kernels_line() {
  return "cpu kernels: " + run::cpu_kernels().onednn.summary();
}

/// The JSON object under "onednn": built, version, isa, f32, bf16, impl_f32, impl_bf16,
/// why_not_f32, why_not_bf16 (run::OnednnPath::to_json, the object `tessera backends --json`
/// gives under cpu_kernels).
inline std::string onednn_json() { return run::cpu_kernels().onednn.to_json(); }

}  // namespace tessera::bench
