// TopKCompressor: top-k selection with error feedback over one bucket, its pairs all-gathered and
// scatter-added in group-rank order; the kernels are compute ops (compute/ops.hpp, topk_*), so
// traces show them and the simulator times them.
#include "tessera/nn/grad_compression.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/comm/mesh_comm.hpp"
#include "tessera/compute/op_table.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"

namespace tessera::nn {

using core::MemCategory;
using core::Tensor;

std::string_view grad_compression_name(GradCompression c) noexcept {
  switch (c) {
    case GradCompression::None: return "none";
    case GradCompression::TopK: return "topk";
  }
  return "?";
}

std::optional<GradCompression> parse_grad_compression(std::string_view name) {
  if (name == "none") return GradCompression::None;
  if (name == "topk") return GradCompression::TopK;
  return std::nullopt;
}

void check_topk_ratio(double ratio, std::string_view where) {
  TESSERA_CHECK(std::isfinite(ratio) && ratio > 0 && ratio <= 1, where, ": top-k ratio ", ratio,
                " is not a fraction of the bucket's elements; use 0 < ratio <= 1 (e.g. 0.01 keeps 1%)");
}

std::int64_t topk_count(std::int64_t n, double ratio) {
  check_topk_ratio(ratio, "topk_count");
  TESSERA_CHECK(n >= 0, "topk_count: a bucket of ", n, " elements");
  if (n == 0) return 0;
  const double k = std::ceil(ratio * double(n));
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(k), 1, n);
}

TopKCompressor::TopKCompressor(compute::Backend& compute, std::int64_t n, core::DType dtype, double ratio,
                               int group_size, core::AllocatorPtr alloc)
    : compute_(&compute), n_(n), dtype_(dtype), group_size_(group_size), alloc_(std::move(alloc)) {
  check_topk_ratio(ratio, "top-k gradient compression (TrainOptions::topk_ratio)");
  TESSERA_CHECK(dtype == core::DType::F32 || dtype == core::DType::F64, "top-k gradient compression: buckets of ",
                core::dtype_name(dtype), " are not supported; the trainer's gradients are f32 or f64");
  TESSERA_CHECK(n > 0 && group_size > 0, "top-k gradient compression: a bucket of ", n, " elements over ",
                group_size, " ranks");
  TESSERA_CHECK(dtype == core::DType::F64 || n <= std::numeric_limits<std::int32_t>::max(),
                "top-k gradient compression: a bucket of ", n, " f32 elements does not fit int32 indices; "
                "use smaller buckets (--bucket-mib)");
  k_ = topk_count(n, ratio);
  residual_ = Tensor::zeros({n}, dtype, MemCategory::OptimizerState, alloc_);
}

std::size_t TopKCompressor::wire_bytes() const noexcept {
  return std::size_t(group_size_) * std::size_t(k_) * 2 * core::dtype_size(dtype_);
}

std::size_t TopKCompressor::dense_bytes() const noexcept { return std::size_t(n_) * core::dtype_size(dtype_); }

comm::WorkPtr TopKCompressor::post(comm::Backend& group, const Tensor& grad, double scale) {
  TESSERA_CHECK(!acc_.defined(), "top-k gradient compression: a bucket was posted again before its previous "
                "post was committed or discarded (a trainer bug)");
  TESSERA_CHECK(group.size() == group_size_, "top-k gradient compression: built for a group of ", group_size_,
                " ranks but posted on one of ", group.size());
  TESSERA_CHECK(grad.numel() == n_ && grad.dtype() == dtype_ && grad.is_contiguous(),
                "top-k gradient compression: expected a contiguous bucket of ", n_, " ", core::dtype_name(dtype_),
                " elements, got ", grad.describe());
  TESSERA_CHECK(grad.is_host(), "top-k gradient compression runs on host memory; the bucket ", grad.describe(),
                " is in device memory: train on the cpu backend or without --grad-compression");
  scale_ = scale;
  const core::DType slot = compute::index_dtype(dtype_);
  acc_ = Tensor::empty({n_}, dtype_, MemCategory::Workspace, alloc_);
  send_ = Tensor::empty({2 * k_}, slot, MemCategory::Gradient, alloc_);
  recv_ = Tensor::empty({2 * k_ * group_size_}, slot, MemCategory::Gradient, alloc_);
  {
    Tensor order = Tensor::empty({n_}, slot, MemCategory::Workspace, alloc_);
    compute::topk_select(*compute_, grad, residual_, scale, k_, acc_, order, send_);
  }
  return group.all_gather(comm::buffer_of(send_), comm::buffer_of(recv_));
}

void TopKCompressor::finish(Tensor& grad) {
  TESSERA_CHECK(recv_.defined(), "top-k gradient compression: finish() without a post (a trainer bug)");
  compute::topk_scatter_add(*compute_, recv_, k_, grad);
}

void TopKCompressor::commit() {
  TESSERA_CHECK(acc_.defined(), "top-k gradient compression: commit() without a post (a trainer bug)");
  compute::topk_residual(*compute_, send_, 1.0 / scale_, acc_, residual_);
  discard();
}

void TopKCompressor::discard() noexcept {
  acc_ = Tensor();
  send_ = Tensor();
  recv_ = Tensor();
}

}  // namespace tessera::nn
