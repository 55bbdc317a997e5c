// Internal to the datasets: checks a batch layout against the images, names a rank's part of the
// batch and maps its batch rows to global sample indices.
#pragma once

#include <cstdint>

#include "tessera/core/error.hpp"
#include "tessera/core/layout.hpp"
#include "tessera/data/dataset.hpp"

namespace tessera::data::internal {

/// The global index ranges of the (N,C,H,W) batch that one rank holds.
struct BatchPart {
  core::Range n, c, h, w;
  std::int64_t batch = 0;  ///< global batch size B
};

/// Checks that `layout` is an NCHW layout of images shaped `image` (C,H,W) and returns `rank`'s
/// part. `who` names the dataset in messages.
inline BatchPart batch_part(const core::Layout& layout, int rank, const core::Shape& image, const char* who) {
  const core::Shape& g = layout.global_shape();
  TESSERA_CHECK(layout.ndim() == 4 && g[1] == image[0] && g[2] == image[1] && g[3] == image[2], who,
                ": the batch layout ", layout.to_string(), " does not hold (N,C,H,W) images of ",
                core::shape_str(image), "; build the input layout from the dataset's image_shape()");
  TESSERA_CHECK(g[0] >= 1, who, ": the batch layout ", layout.to_string(), " has an empty batch");
  TESSERA_CHECK(!layout.has_partial(), who, ": the batch layout ", layout.to_string(),
                " is Partial on some mesh dimension; input data can only be sharded or replicated");
  return {layout.local_range(rank, 0), layout.local_range(rank, 1), layout.local_range(rank, 2),
          layout.local_range(rank, 3), g[0]};
}

/// Global sample index of batch row `n` (0 ≤ n < batch) of batch `step`: (step·B + n) mod size.
/// Exact while size < 3·10⁹ (the products stay within int64).
inline std::int64_t sample_index(std::int64_t step, std::int64_t batch, std::int64_t n, std::int64_t size) {
  TESSERA_CHECK(step >= 0, "dataset: batch step ", step, " is negative");
  return ((step % size) * (batch % size) % size + n) % size;
}

/// Uninitialised batch tensors of the part's shape: images f32 (N,C,H,W), labels i64 — (N) for
/// classification, (N,H,W) for segmentation — both booked as activations with `allocator`.
inline Batch allocate_batch(const BatchPart& p, Task task, const core::AllocatorPtr& allocator) {
  Batch b;
  b.images = core::Tensor::empty({p.n.size(), p.c.size(), p.h.size(), p.w.size()}, core::DType::F32,
                                 core::MemCategory::Activation, allocator);
  const core::Shape label_shape = task == Task::Classify ? core::Shape{p.n.size()}
                                                         : core::Shape{p.n.size(), p.h.size(), p.w.size()};
  b.labels = core::Tensor::empty(label_shape, core::DType::I64, core::MemCategory::Activation, allocator);
  return b;
}

}  // namespace tessera::data::internal
