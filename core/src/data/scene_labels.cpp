// SceneLabels: a classification dataset whose samples are grouped into scenes of V views.
#include "tessera/data/scene_labels.hpp"

#include <vector>

#include "tessera/core/error.hpp"

namespace tessera::data {

namespace {

class SceneLabels final : public Dataset {
 public:
  SceneLabels(std::shared_ptr<const Dataset> inner, int views)
      : inner_(std::move(inner)), views_(views) {}
  Task task() const noexcept override { return inner_->task(); }
  int num_classes() const noexcept override { return inner_->num_classes(); }
  core::Shape image_shape() const override { return inner_->image_shape(); }
  // Whole scenes only: batches wrap around at size(), and a wrap in mid-scene would start the
  // next epoch's scenes at a view other than the first.
  std::int64_t size() const noexcept override { return inner_->size() / views_ * views_; }

  void load_into(std::span<const std::int64_t> samples, const core::Layout& layout, int rank,
                 Batch& out) const override {
    load_into_at(samples, 0, layout, rank, out);
  }
  DataStats stats(int rank) const override { return inner_->stats(rank); }

  void load_into_at(std::span<const std::int64_t> samples, std::int64_t first_position,
                    const core::Layout& layout, int rank, Batch& out) const override {
    inner_->load_into_at(samples, first_position, layout, rank, out);
    if (views_ == 1 || out.labels.is_meta()) return;
    std::vector<std::int64_t> firsts(samples.begin(), samples.end());
    for (std::int64_t& i : firsts) i = i / views_ * views_;
    // The first views' labels: the inner dataset gives a label only with its pixels.
    Batch scratch = allocate_batch(layout, rank, task(), nullptr);
    inner_->load_into(firsts, layout, rank, scratch);
    out.labels.copy_from(scratch.labels);
  }

 private:
  std::shared_ptr<const Dataset> inner_;
  int views_;
};

}  // namespace

std::shared_ptr<const Dataset> scene_labels(std::shared_ptr<const Dataset> inner, int views) {
  TESSERA_CHECK(inner != nullptr, "scene labels: no dataset to group into scenes");
  TESSERA_CHECK(views >= 1, "scene labels: ", views, " views per scene; use 1 or more");
  if (views == 1) return inner;
  TESSERA_CHECK(inner->size() >= views, "scene labels: the dataset has ", inner->size(),
                " samples, fewer than one "
                "scene of ",
                views, " views");
  TESSERA_CHECK(inner->task() == Task::Classify,
                "scene labels: the dataset is a segmentation dataset; scenes of "
                "camera views are labelled for classification only");
  return std::make_shared<SceneLabels>(std::move(inner), views);
}

}  // namespace tessera::data
