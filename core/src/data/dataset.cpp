// What every dataset shares: its batch tensors, and loading by samples or by step in index order.
#include "tessera/data/dataset.hpp"

#include "tessera/data/loader.hpp"

namespace tessera::data {

DataStats& DataStats::operator+=(const DataStats& o) {
  samples += o.samples;
  files += o.files;
  pixels_decoded += o.pixels_decoded;
  pixels_total += o.pixels_total;
  bytes_read += o.bytes_read;
  decode_s += o.decode_s;
  bad_skipped += o.bad_skipped;
  labels_ignored += o.labels_ignored;
  return *this;
}

DataStats DataStats::operator-(const DataStats& o) const {
  return {samples - o.samples,
          files - o.files,
          pixels_decoded - o.pixels_decoded,
          pixels_total - o.pixels_total,
          bytes_read - o.bytes_read,
          decode_s - o.decode_s,
          bad_skipped - o.bad_skipped,
          labels_ignored - o.labels_ignored};
}

Batch allocate_batch(const core::Layout& layout, int rank, Task task, const core::AllocatorPtr& allocator) {
  TESSERA_CHECK(layout.ndim() == 4, "batch layout ", layout.to_string(), " is not an (N,C,H,W) layout");
  const core::Shape s = layout.local_shape(rank);
  Batch b;
  b.images = core::Tensor::empty(s, core::DType::F32, core::MemCategory::Activation, allocator);
  const core::Shape labels = task == Task::Classify ? core::Shape{s[0]} : core::Shape{s[0], s[2], s[3]};
  b.labels = core::Tensor::empty(labels, core::DType::I64, core::MemCategory::Activation, allocator);
  return b;
}

Batch Dataset::load_samples(std::span<const std::int64_t> samples, const core::Layout& layout, int rank,
                            const core::AllocatorPtr& allocator) const {
  TESSERA_CHECK(rank >= 0 && rank < layout.mesh().size(), "dataset: rank ", rank, " is not in the batch layout's mesh ",
                layout.mesh().to_string());
  Batch b = allocate_batch(layout, rank, task(), allocator);
  load_into(samples, layout, rank, b);
  return b;
}

Batch Dataset::load(std::int64_t step, const core::Layout& layout, int rank, const core::AllocatorPtr& allocator) const {
  TESSERA_CHECK(layout.ndim() == 4, "batch layout ", layout.to_string(), " is not an (N,C,H,W) layout");
  TESSERA_CHECK(rank >= 0 && rank < layout.mesh().size(), "dataset: rank ", rank,
                " is not in the batch layout's mesh ", layout.mesh().to_string());
  const SampleOrder order(size(), /*shuffle=*/false, 0);
  const std::int64_t batch = layout.global_shape()[0];
  Batch b = allocate_batch(layout, rank, task(), allocator);
  load_into_at(order.batch(step, batch), step * batch, layout, rank, b);
  return b;
}

}  // namespace tessera::data
