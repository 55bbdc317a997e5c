// Gradient compression for the trainer's buckets: top-k sparsification with error feedback, one
// TopKCompressor per bucket and rank (docs/training.md#top-k-gradient-compression).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "tessera/comm/backend.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/core/allocator.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::nn {

/// How gradient buckets are compressed before they travel (TrainOptions::grad_compression).
enum class GradCompression : std::uint8_t {
  None,  ///< the dense all-reduce of the whole bucket
  TopK,  ///< each rank sends its k largest entries (with error feedback); see TopKCompressor
};

/// "none" or "topk".
std::string_view grad_compression_name(GradCompression c) noexcept;
/// The compression spelled `name` ("none", "topk"), or nullopt.
std::optional<GradCompression> parse_grad_compression(std::string_view name);

/// The entries top-k keeps of a bucket of `n` elements: ceil(ratio * n), at least 1 when n > 0,
/// at most n. Throws InvalidArgument unless 0 < ratio <= 1 (and finite).
std::int64_t topk_count(std::int64_t n, double ratio);

/// Checks a top-k ratio: throws InvalidArgument naming `where` and the value unless 0 < ratio <= 1.
void check_topk_ratio(double ratio, std::string_view where);

/// Top-k sparsification with error feedback of one gradient bucket on one rank (Stich et al.,
/// "Sparsified SGD with memory", NeurIPS'18; Lin et al., "Deep gradient compression", ICLR'18).
///
/// Per step, with g this rank's bucket (in the loss scale's units, as backward leaves it), r the
/// residual (in the units of the loss itself) and s the loss scale:
///   acc = g + s·r;  S = the k indices of the largest |acc| (NaN counts as largest, ties go to the
///   lower index), sent as (index, value) pairs;  the reduced bucket = Σ over the group's ranks,
///   in group-rank order, of the sparse vectors (every rank adds the same values in the same
///   order: identical bits);  on commit, r = acc with the entries of S zeroed, divided by s.
/// Nothing an update did not apply is lost: over any run, Σ applied buckets + Σ_ranks r equals
/// Σ_ranks Σ_steps g (up to rounding in acc and in the sums; exactly for small integers).
///
/// Wire format: one all_gather over the bucket's group of k indices then k values per rank, in
/// one buffer of 2k slots: I32 slots for f32 buckets (index int32, value the f32's bits), I64 for
/// f64 buckets (index int64, value the f64's bits). Each rank receives group·k·(index + value)
/// bytes, 8 per pair for f32, against the n·4 of the dense all-reduce's buffer.
///
/// Memory, booked on the allocator (also on meta allocators, so the simulator sees it): the
/// residual, n elements of the bucket's dtype, OptimizerState (per-parameter state kept across
/// steps, like AdamW's moments); from post() to commit()/discard(), the accumulator (n elements,
/// Workspace) and the pair buffers (2k and 2k·group slots, Gradient); inside post(), an index
/// scratch (n int32/int64, Workspace). On meta tensors no element is read or written, but the
/// same tensors are allocated and the same all_gather is posted.
class TopKCompressor {
 public:
  /// A compressor for buckets of `n` elements of `dtype` (F32 or F64) reduced over a group of
  /// `group_size` ranks, its kernels run on `compute` (compute::topk_select, topk_scatter_add,
  /// topk_residual; a recording backend on meta tensors). Throws InvalidArgument for a bad ratio,
  /// another dtype, or an f32 bucket of 2^31 or more elements (its int32 indices).
  TopKCompressor(compute::Backend& compute, std::int64_t n, core::DType dtype, double ratio, int group_size,
                 core::AllocatorPtr alloc);

  std::int64_t size() const noexcept { return n_; }
  /// Entries each rank sends per step.
  std::int64_t k() const noexcept { return k_; }
  /// Bytes of the all_gather's receive buffer (group·k pairs): what one rank receives per step.
  std::size_t wire_bytes() const noexcept;
  /// Bytes of the bucket: the buffer a dense all-reduce would reduce.
  std::size_t dense_bytes() const noexcept;

  /// Forms the accumulator from `grad` (contiguous, n elements, host memory) and the residual at
  /// loss scale `scale`, selects and packs the pairs, and posts the all_gather on `group` (size
  /// group_size). `grad` is only read. The returned Work must be waited for before finish().
  /// Throws InvalidArgument when a previous post was neither committed nor discarded.
  comm::WorkPtr post(comm::Backend& group, const core::Tensor& grad, double scale);
  /// After the wait: overwrites `grad` with the sum of every rank's pairs (zero elsewhere),
  /// added in group-rank order.
  void finish(core::Tensor& grad);
  /// The step's update was applied: the residual becomes the accumulator without the sent
  /// entries, divided by the scale; the accumulator and pair buffers are released.
  void commit();
  /// The step was skipped or failed: the residual stays as it was; the buffers are released.
  void discard() noexcept;

  /// The residual, n elements (zero before the first commit).
  const core::Tensor& residual() const noexcept { return residual_; }
  core::Tensor& residual() noexcept { return residual_; }

 private:
  compute::Backend* compute_;
  std::int64_t n_, k_;
  core::DType dtype_;
  int group_size_;
  core::AllocatorPtr alloc_;
  core::Tensor residual_;
  core::Tensor acc_;         ///< from post to commit/discard
  core::Tensor send_, recv_; ///< pair buffers, from post to commit/discard
  double scale_ = 1;
};

}  // namespace tessera::nn
