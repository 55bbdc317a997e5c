// TopKCompressor: top-k selection with error feedback over one bucket, its pairs all-gathered and
// scatter-added in group-rank order.
#include "tessera/nn/grad_compression.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tessera/comm/mesh_comm.hpp"
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

namespace {

// The selection and the scatter-add for one element type T with index type I (the slot type of
// the pair buffers: the same width as T, so a value's bits fit one slot).
template <class T, class I>
struct Kernels {
  static_assert(sizeof(T) == sizeof(I));

  // acc = g + s·r
  static void accumulate(const T* g, const T* r, T s, T* acc, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) acc[i] = g[i] + s * r[i];
  }

  // The k indices of the largest |acc| (NaN largest, ties to the lower index), ascending, into the
  // first k slots of `pairs`, their values into the next k. `order` is scratch of n indices.
  static void select(const T* acc, std::int64_t n, std::int64_t k, I* order, I* pairs) {
    for (std::int64_t i = 0; i < n; ++i) order[i] = static_cast<I>(i);
    // A strict total order, so the chosen set does not depend on how nth_element proceeds.
    auto before = [acc](I a, I b) {
      const T x = std::abs(acc[a]), y = std::abs(acc[b]);
      const bool xn = std::isnan(x), yn = std::isnan(y);
      if (xn != yn) return xn;
      if (!xn && x != y) return x > y;
      return a < b;
    };
    if (k < n) std::nth_element(order, order + k, order + n, before);
    std::sort(order, order + k);
    for (std::int64_t j = 0; j < k; ++j) {
      pairs[j] = order[j];
      std::memcpy(&pairs[k + j], &acc[order[j]], sizeof(T));
    }
  }

  // grad = Σ over ranks (in rank order) of each rank's k pairs.
  static void scatter_add(const I* recv, int ranks, std::int64_t k, T* grad, std::int64_t n) {
    std::fill(grad, grad + n, T(0));
    for (int q = 0; q < ranks; ++q) {
      const I* block = recv + std::int64_t(q) * 2 * k;
      for (std::int64_t j = 0; j < k; ++j) {
        const I idx = block[j];
        TESSERA_ASSERT(idx >= 0 && idx < n, "top-k: rank ", q, " sent index ", idx, " outside its bucket of ", n);
        T v;
        std::memcpy(&v, &block[k + j], sizeof(T));
        grad[idx] += v;
      }
    }
  }

  // r = (acc with the sent entries zeroed) / s
  static void residual(T* acc, const I* sent, std::int64_t k, T inv_s, T* r, std::int64_t n) {
    for (std::int64_t j = 0; j < k; ++j) acc[sent[j]] = T(0);
    for (std::int64_t i = 0; i < n; ++i) r[i] = acc[i] * inv_s;
  }
};

core::DType slot_dtype(core::DType t) { return t == core::DType::F64 ? core::DType::I64 : core::DType::I32; }

}  // namespace

TopKCompressor::TopKCompressor(std::int64_t n, core::DType dtype, double ratio, int group_size,
                               core::AllocatorPtr alloc)
    : n_(n), dtype_(dtype), group_size_(group_size), alloc_(std::move(alloc)) {
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
  const core::DType slot = slot_dtype(dtype_);
  acc_ = Tensor::empty({n_}, dtype_, MemCategory::Workspace, alloc_);
  send_ = Tensor::empty({2 * k_}, slot, MemCategory::Gradient, alloc_);
  recv_ = Tensor::empty({2 * k_ * group_size_}, slot, MemCategory::Gradient, alloc_);
  {
    Tensor order = Tensor::empty({n_}, slot, MemCategory::Workspace, alloc_);
    if (!grad.is_meta()) {
      if (dtype_ == core::DType::F32) {
        using K = Kernels<float, std::int32_t>;
        K::accumulate(grad.data<float>(), residual_.data<float>(), float(scale), acc_.data<float>(), n_);
        K::select(acc_.data<float>(), n_, k_, order.data<std::int32_t>(), send_.data<std::int32_t>());
      } else {
        using K = Kernels<double, std::int64_t>;
        K::accumulate(grad.data<double>(), residual_.data<double>(), scale, acc_.data<double>(), n_);
        K::select(acc_.data<double>(), n_, k_, order.data<std::int64_t>(), send_.data<std::int64_t>());
      }
    }
  }
  return group.all_gather(comm::buffer_of(send_), comm::buffer_of(recv_));
}

void TopKCompressor::finish(Tensor& grad) {
  TESSERA_CHECK(recv_.defined(), "top-k gradient compression: finish() without a post (a trainer bug)");
  if (grad.is_meta()) return;
  if (dtype_ == core::DType::F32)
    Kernels<float, std::int32_t>::scatter_add(recv_.data<std::int32_t>(), group_size_, k_, grad.data<float>(), n_);
  else
    Kernels<double, std::int64_t>::scatter_add(recv_.data<std::int64_t>(), group_size_, k_, grad.data<double>(), n_);
}

void TopKCompressor::commit() {
  TESSERA_CHECK(acc_.defined(), "top-k gradient compression: commit() without a post (a trainer bug)");
  if (!acc_.is_meta()) {
    if (dtype_ == core::DType::F32)
      Kernels<float, std::int32_t>::residual(acc_.data<float>(), send_.data<std::int32_t>(), k_,
                                             float(1.0 / scale_), residual_.data<float>(), n_);
    else
      Kernels<double, std::int64_t>::residual(acc_.data<double>(), send_.data<std::int64_t>(), k_, 1.0 / scale_,
                                              residual_.data<double>(), n_);
  }
  discard();
}

void TopKCompressor::discard() noexcept {
  acc_ = Tensor();
  send_ = Tensor();
  recv_ = Tensor();
}

}  // namespace tessera::nn
