// Datasets: synthetic images are deterministic and learnable-looking; every sharded load of the
// synthetic and the .npy datasets reassembles to exactly the unsharded load.
#include <cmath>
#include <cstring>
#include <map>

#include "support/test_utils.hpp"
#include "tessera/data/dataset.hpp"

using namespace tessera;
using core::DeviceMesh;
using core::Layout;
using core::Shard;
using core::Tensor;
using data::Task;
using test::error_of;

namespace {

/// The layouts every dataset is checked under, for a global batch (B, C, H, W).
std::vector<Layout> shard_layouts(const core::Shape& g) {
  return {
      Layout(DeviceMesh({3}, {"sp"}), g, {Shard(3)}),                                // W over 3 uneven ranks
      Layout(DeviceMesh({3}, {"sp"}), g, {Shard(2)}),                                // H over 3 uneven ranks
      Layout(DeviceMesh({2, 2}, {"sp_h", "sp_w"}), g, {Shard(2), Shard(3)}),         // 2x2 tiles
      Layout(DeviceMesh({2, 3}, {"dp", "sp"}), g, {Shard(0), Shard(3)}),             // dp x sp
      Layout(DeviceMesh({2, 2}, {"dp", "sp"}), g, {Shard(0), Shard(2)}, {1, 1, 4, 1}),  // aligned H
  };
}

/// Loads batch `step` on every rank of `layout` and requires each part to equal the matching
/// slice of the unsharded batch, bit for bit.
void require_shards_match(const data::Dataset& ds, std::int64_t step, const Layout& layout) {
  const data::Batch whole = ds.load(step, Layout::replicated(DeviceMesh(), layout.global_shape()), 0, nullptr);
  for (int r = 0; r < layout.mesh().size(); ++r) {
    INFO("layout " << layout.to_string() << " rank " << r);
    const data::Batch part = ds.load(step, layout, r, nullptr);
    REQUIRE(part.images.shape() == layout.local_shape(r));
    const auto n = layout.local_range(r, 0), c = layout.local_range(r, 1);
    const auto h = layout.local_range(r, 2), w = layout.local_range(r, 3);
    const Tensor img = whole.images.narrow(0, n.begin, n.size())
                           .narrow(1, c.begin, c.size())
                           .narrow(2, h.begin, h.size())
                           .narrow(3, w.begin, w.size());
    REQUIRE(test::bytes_of(part.images) == test::bytes_of(img));
    Tensor lab = whole.labels.narrow(0, n.begin, n.size());
    if (ds.task() == Task::Segment) lab = lab.narrow(1, h.begin, h.size()).narrow(2, w.begin, w.size());
    REQUIRE(part.labels.shape() == lab.shape());
    REQUIRE(test::bytes_of(part.labels) == test::bytes_of(lab));
  }
}

std::vector<std::int64_t> labels_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<std::int64_t>(c.data<std::int64_t>(), c.data<std::int64_t>() + c.numel());
}

}  // namespace

TEST_CASE("synthetic data: same seed same bits, another seed other bits", "[dataset]") {
  const Task task = GENERATE(Task::Classify, Task::Segment);
  data::SyntheticOptions o{task, 3, 24, 40, 4, 50, 7};
  const Layout whole = Layout::replicated(DeviceMesh(), {6, 3, 24, 40});
  const auto a = data::make_synthetic(o)->load(2, whole, 0, nullptr);
  const auto b = data::make_synthetic(o)->load(2, whole, 0, nullptr);
  REQUIRE(test::bytes_of(a.images) == test::bytes_of(b.images));
  REQUIRE(test::bytes_of(a.labels) == test::bytes_of(b.labels));
  o.seed = 8;
  const auto c = data::make_synthetic(o)->load(2, whole, 0, nullptr);
  REQUIRE(test::bytes_of(a.images) != test::bytes_of(c.images));
  // Another step shows other samples.
  REQUIRE(test::bytes_of(a.images) != test::bytes_of(data::make_synthetic(o)->load(3, whole, 0, nullptr).images));
}

TEST_CASE("synthetic data: sharded loads reassemble to the unsharded load", "[dataset]") {
  const Task task = GENERATE(Task::Classify, Task::Segment);
  const auto ds = data::make_synthetic({task, 3, 11, 10, 5, 7, 42});
  for (const Layout& l : shard_layouts({5, 3, 11, 10}))
    for (std::int64_t step : {0, 3}) require_shards_match(*ds, step, l);
  // Channel shards too (not a training layout, but the pixels must still agree).
  require_shards_match(*ds, 1, Layout(DeviceMesh({2}, {"sp"}), {5, 3, 11, 10}, {Shard(1)}));
}

TEST_CASE("synthetic data: batches wrap around the dataset", "[dataset]") {
  const auto ds = data::make_synthetic({Task::Classify, 1, 8, 8, 3, 4, 1});
  const auto whole = ds->load(0, Layout::replicated(DeviceMesh(), {8, 1, 8, 8}), 0, nullptr);
  // Samples 0..3 then 0..3 again.
  REQUIRE(test::bytes_of(whole.images.narrow(0, 0, 4)) == test::bytes_of(whole.images.narrow(0, 4, 4)));
  const auto next = ds->load(1, Layout::replicated(DeviceMesh(), {3, 1, 8, 8}), 0, nullptr);  // samples 3,0,1
  REQUIRE(test::bytes_of(next.images.narrow(0, 1, 2)) == test::bytes_of(whole.images.narrow(0, 0, 2)));
}

TEST_CASE("synthetic data: meta allocators get shapes and bookings, no pixels", "[dataset]") {
  const Task task = GENERATE(Task::Classify, Task::Segment);
  const auto ds = data::make_synthetic({task, 3, 64, 96, 4, 16, 0});
  auto meta = std::make_shared<core::Allocator>("meta", true);
  const Layout l(DeviceMesh({2, 2}, {"dp", "sp"}), {4, 3, 64, 96}, {Shard(0), Shard(3)});
  const data::Batch b = ds->load(0, l, 3, meta);
  REQUIRE(b.images.is_meta());
  REQUIRE(b.labels.is_meta());
  REQUIRE(b.images.shape() == core::Shape{2, 3, 64, 48});
  REQUIRE(b.labels.shape() == (task == Task::Classify ? core::Shape{2} : core::Shape{2, 64, 48}));
  REQUIRE(b.images.dtype() == core::DType::F32);
  REQUIRE(b.labels.dtype() == core::DType::I64);
  REQUIRE(meta->stats().current_of(core::MemCategory::Activation) >= b.images.nbytes() + b.labels.nbytes());
}

TEST_CASE("synthetic data: labels in range, classes balanced, pixels normalised", "[dataset]") {
  const Task task = GENERATE(Task::Classify, Task::Segment);
  const int classes = GENERATE(2, 4, 10);
  const auto ds = data::make_synthetic({task, 3, 32, 48, classes, 400, 3});
  const data::Batch b = ds->load(0, Layout::replicated(DeviceMesh(), {400, 3, 32, 48}), 0, nullptr);
  std::map<std::int64_t, std::int64_t> count;
  for (auto v : labels_of(b.labels)) ++count[v];
  REQUIRE(count.begin()->first >= 0);
  REQUIRE(count.rbegin()->first < classes);
  REQUIRE(static_cast<int>(count.size()) == classes);  // every class occurs
  if (task == Task::Classify) {
    for (const auto& [cls, n] : count) {
      INFO("class " << cls << ": " << n << " of 400");
      REQUIRE(n > 400 / classes / 2);
      REQUIRE(n < 400 / classes * 2);
    }
  } else {
    const double background = static_cast<double>(count[0]) / b.labels.numel();
    INFO("background fraction " << background);
    REQUIRE(background > 0.3);
    REQUIRE(background < 0.95);
  }
  const auto px = test::to_doubles(b.images);
  double sum = 0, sq = 0;
  for (double v : px) sum += v, sq += v * v;
  const double mean = sum / px.size(), sd = std::sqrt(sq / px.size() - mean * mean);
  INFO("pixel mean " << mean << " sd " << sd);
  REQUIRE(std::abs(mean) < 0.25);
  REQUIRE(sd > 0.5);
  REQUIRE(sd < 1.5);
}

TEST_CASE("synthetic data: options and layouts are checked", "[dataset]") {
  REQUIRE_THAT(error_of([] { data::make_synthetic({Task::Classify, 3, 8, 8, 13, 4, 0}); }),
               Catch::Matchers::Contains("num_classes 13 is outside [2, 12]"));
  REQUIRE_THAT(error_of([] { data::make_synthetic({Task::Segment, 3, 0, 8, 4, 4, 0}); }),
               Catch::Matchers::Contains("positive sizes"));
  const auto ds = data::make_synthetic({Task::Classify, 3, 8, 8, 4, 4, 0});
  REQUIRE_THAT(error_of([&] { ds->load(0, Layout::replicated(DeviceMesh(), {2, 3, 8, 9}), 0, nullptr); }),
               Catch::Matchers::Contains("does not hold (N,C,H,W) images of [3,8,8]"));
  const Layout partial(DeviceMesh({2}, {"sp"}), {2, 3, 8, 8}, {core::Partial()});
  REQUIRE_THAT(error_of([&] { ds->load(0, partial, 0, nullptr); }), Catch::Matchers::Contains("Partial"));
}
