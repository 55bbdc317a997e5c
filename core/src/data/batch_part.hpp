// Internal to the datasets: checks a batch layout against the images, names a rank's part of the
// batch and maps its batch rows to global sample indices.
#pragma once

#include <cstdint>
#include <span>

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

/// Checks what load_into() is given against the part: `samples` one per global batch row, each
/// in [0, size), and `out` shaped as allocate_batch() shapes the part for `task`.
inline void check_into(std::span<const std::int64_t> samples, std::int64_t size, const BatchPart& p, Task task,
                       const Batch& out, const char* who) {
  TESSERA_CHECK(static_cast<std::int64_t>(samples.size()) == p.batch, who, ": ", samples.size(),
                " samples for a batch of ", p.batch, "; give one sample index per batch row");
  for (std::int64_t n = p.n.begin; n < p.n.end; ++n) {
    const std::int64_t s = samples[static_cast<std::size_t>(n)];
    TESSERA_CHECK(s >= 0 && s < size, who, ": batch row ", n, " asks for sample ", s, ", which is outside [0, ", size,
                  "): the dataset has ", size, " samples");
  }
  const core::Shape images{p.n.size(), p.c.size(), p.h.size(), p.w.size()};
  const core::Shape labels = task == Task::Classify ? core::Shape{p.n.size()} : core::Shape{p.n.size(), p.h.size(), p.w.size()};
  TESSERA_CHECK(out.images.defined() && out.labels.defined() && out.images.shape() == images &&
                    out.images.dtype() == core::DType::F32 && out.labels.shape() == labels &&
                    out.labels.dtype() == core::DType::I64 && out.images.is_contiguous() && out.labels.is_contiguous(),
                who, ": the batch to load into does not hold this rank's part (images f32 ", core::shape_str(images),
                ", labels i64 ", core::shape_str(labels), ", contiguous); make it with data::allocate_batch");
  TESSERA_CHECK(out.images.is_meta() || (out.images.is_host() && out.labels.is_host()), who,
                ": datasets load into host memory; the batch given is in ", core::memory_space_name(out.images.space()));
}

}  // namespace tessera::data::internal
