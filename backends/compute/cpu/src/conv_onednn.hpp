// Pointwise (1×1) convolutions as oneDNN matrix products on the NCHW planes, in f32 and bf16,
// threads split over pixel blocks by the backend's own pool (each block one single-threaded
// oneDNN call), primitives cached per geometry.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "conv_common.hpp"

namespace tessera::compute::cpu {

/// Pixels per forward/backward-data block and columns per weight-gradient block. Fixed (not a
/// function of the thread count), so a pixel's result does not depend on the threads.
inline constexpr int kOnednnPixelBlock = 1024;

/// One 2-d matrix product C (M×N) = A (M×K) · B (K×N), each operand with its own row and column
/// strides (in elements), A and B of `ab` (f32 or bf16), C of `c`; with `sum`, C += instead of =.
struct MatmulShape {
  core::DType ab = core::DType::F32, c = core::DType::F32;
  std::int64_t m = 0, k = 0, n = 0;
  std::int64_t a_rs = 0, a_cs = 0, b_rs = 0, b_cs = 0, c_rs = 0, c_cs = 0;
  bool sum = false;
  auto key() const { return std::tie(ab, c, m, k, n, a_rs, a_cs, b_rs, b_cs, c_rs, c_cs, sum); }
  bool operator<(const MatmulShape& o) const { return key() < o.key(); }
};

/// A created primitive (opaque here: oneDNN's types stay in conv_onednn.cpp).
struct Matmul;

/// The oneDNN primitives of one CpuBackend, created once per shape and kept (a ConvNeXt has a
/// few dozen). Lookups happen on the calling thread before a pool run; execution is thread-safe.
class OnednnCache {
 public:
  OnednnCache();
  ~OnednnCache();
  const Matmul& get(const MatmulShape& s);
  /// oneDNN's name for the implementation of s's primitive ("gemm:jit", "brg:avx512_core_bf16").
  const std::string& impl(const MatmulShape& s);
  std::size_t size() const { return entries_.size(); }

 private:
  std::map<MatmulShape, std::unique_ptr<Matmul>> entries_;
};

/// True when the oneDNN path takes this geometry and dtype (pointwise or patchify, built, and for
/// bf16 a CPU with bf16 instructions). S is float (f32) or std::uint16_t (bf16; ConvContext::half
/// says so).
bool onednn_applies(const Conv2dParams& p, const ConvDims& d, core::DType t);

/// A patchify convolution: kernel == stride, no padding, dilation 1, a kernel larger than 1×1, and
/// every output pixel's patch inside x (ConvNeXt's stem and downsampling layers). Patches do not
/// overlap, so gathering them is a permutation (conv_onednn_patch.cpp).
bool patchify_applies(const Conv2dParams& p, const ConvDims& d);

/// Patchify convolutions: per sample, group and block of output pixels the patches are gathered
/// into a column block (K = Cin/g·kh·kw rows) and multiplied as the pointwise ones; the data
/// gradient's columns are scattered back (each x element belongs to one patch; rows and columns
/// past the last patch get zero gradient).
template <class S>
void onednn_patch_forward(const ConvContext& c, OnednnCache& cache, PlaneView<const S> x,
                          const float* w, const float* bias, PlaneView<S> y);
template <class S>
void onednn_patch_backward_data(const ConvContext& c, OnednnCache& cache, PlaneView<const S> dy,
                                const float* w, PlaneView<S> dx, bool accumulate);
template <class S>
void onednn_patch_backward_weight(const ConvContext& c, OnednnCache& cache, PlaneView<const S> x,
                                  PlaneView<const S> dy, float* dw, float* db, bool accumulate);

/// Per sample, group and block of pixels: Y = W · X (+ bias). w and bias are f32 (masters); for
/// bf16, w is rounded to bf16 once per call and bias enters as bf16 (rounds_master_to_call_dtype).
template <class S>
void onednn_pointwise_forward(const ConvContext& c, OnednnCache& cache, PlaneView<const S> x,
                              const float* w, const float* bias, PlaneView<S> y);
/// dX (+)= Wᵀ · dY.
template <class S>
void onednn_pointwise_backward_data(const ConvContext& c, OnednnCache& cache, PlaneView<const S> dy,
                                    const float* w, PlaneView<S> dx, bool accumulate);
/// dW (+)= Σ dY · Xᵀ and db (+)= Σ dY, both f32 (products of S accumulated in f32): per-thread
/// partials over fixed column blocks, added in thread order.
template <class S>
void onednn_pointwise_backward_weight(const ConvContext& c, OnednnCache& cache,
                                      PlaneView<const S> x, PlaneView<const S> dy, float* dw,
                                      float* db, bool accumulate);

}  // namespace tessera::compute::cpu
