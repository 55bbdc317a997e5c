// The input pipeline: the per-epoch sample order (a permutation every rank agrees on, the old
// index order without shuffling), and the Loader's queue — the same batches with prefetch on and
// off, whatever the threads; errors and a stuck dataset reach take(); a slow dataset hides behind
// the consumer's work.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "support/test_utils.hpp"
#include "tessera/data/dataset.hpp"
#include "tessera/data/loader.hpp"

using namespace tessera;
using core::DeviceMesh;
using core::Layout;
using core::Shard;
using core::Tensor;
using data::Task;

namespace {

std::shared_ptr<const data::Dataset> synthetic(std::int64_t size, Task task = Task::Segment) {
  data::SyntheticOptions o;
  o.task = task;
  o.channels = 2;
  o.height = 12;
  o.width = 20;
  o.num_classes = 4;
  o.size = size;
  o.seed = 7;
  return data::make_synthetic(o);
}

/// Wraps a dataset: every load sleeps first, counts its calls, and may throw on one call.
class Probe final : public data::Dataset {
 public:
  explicit Probe(std::shared_ptr<const data::Dataset> inner, std::chrono::milliseconds delay = {})
      : inner_(std::move(inner)), delay_(delay) {}
  Task task() const noexcept override { return inner_->task(); }
  int num_classes() const noexcept override { return inner_->num_classes(); }
  core::Shape image_shape() const override { return inner_->image_shape(); }
  std::int64_t size() const noexcept override { return inner_->size(); }
  void load_into(std::span<const std::int64_t> samples, const Layout& layout, int rank, data::Batch& out) const override {
    const int call = calls++;
    std::this_thread::sleep_for(delay_);
    if (call == fail_call) throw InvalidArgument("probe: a broken read");
    if (hang_from >= 0 && call >= hang_from) std::this_thread::sleep_for(std::chrono::seconds(2));
    inner_->load_into(samples, layout, rank, out);
  }
  mutable std::atomic<int> calls{0};
  int fail_call = -1;  ///< this call throws
  int hang_from = -1;  ///< calls from this one on take 2 s

 private:
  std::shared_ptr<const data::Dataset> inner_;
  std::chrono::milliseconds delay_;
};

Layout layout_of(const data::Dataset& ds, const DeviceMesh& mesh, std::vector<core::Placement> p, std::int64_t batch) {
  const core::Shape img = ds.image_shape();
  return Layout(mesh, {batch, img[0], img[1], img[2]}, std::move(p));
}

}  // namespace

TEST_CASE("the sample order without shuffling is the index order, wrapping around", "[dataset][loader]") {
  const data::SampleOrder o(10, false, 3);
  REQUIRE(o.batch(0, 4) == std::vector<std::int64_t>{0, 1, 2, 3});
  REQUIRE(o.batch(2, 4) == std::vector<std::int64_t>{8, 9, 0, 1});
  REQUIRE(o.batch(1, 25) == std::vector<std::int64_t>{5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5,
                                                      6, 7, 8, 9});
  // Far-out steps: positions step·B + n computed without overflow.
  const std::int64_t big = std::int64_t{1} << 61;
  REQUIRE(o.batch(big, 8)[0] == static_cast<std::int64_t>((static_cast<unsigned __int128>(big) * 8) % 10));
}

TEST_CASE("shuffled epochs are permutations drawn from the seed and the epoch alone", "[dataset][loader]") {
  const std::int64_t size = 37;
  const data::SampleOrder a(size, true, 11), b(size, true, 11), c(size, true, 12);
  std::set<std::vector<std::int64_t>> seen;
  for (std::int64_t e = 0; e < 6; ++e) {
    std::vector<std::int64_t> p = a.epoch(e);
    REQUIRE(p == b.epoch(e));  // another rank's order: the same
    seen.insert(p);
    std::sort(p.begin(), p.end());
    for (std::int64_t i = 0; i < size; ++i) REQUIRE(p[static_cast<std::size_t>(i)] == i);
  }
  REQUIRE(seen.size() == 6);                  // every epoch its own order
  REQUIRE(a.epoch(0) != c.epoch(0));          // another seed, another order
  // Batches read the epochs' orders in sequence, across the epoch boundary (B = 10 over 37).
  std::vector<std::int64_t> stream;
  for (std::int64_t s = 0; s < 8; ++s) {
    const auto bt = a.batch(s, 10);
    stream.insert(stream.end(), bt.begin(), bt.end());
  }
  std::vector<std::int64_t> expect = a.epoch(0), e1 = a.epoch(1), e2 = a.epoch(2);
  expect.insert(expect.end(), e1.begin(), e1.end());
  expect.insert(expect.end(), e2.begin(), e2.end());
  expect.resize(stream.size());
  REQUIRE(stream == expect);
}

TEST_CASE("shuffled orders are uniform: each sample is first equally often over seeds", "[dataset][loader]") {
  // 20000 draws of the first place over 5 samples: each count is Binomial(20000, 1/5), mean 4000,
  // standard deviation 56.6; 6 deviations (340) fail a correct shuffle with probability ~1e-8.
  const int n = 5, draws = 20000;
  std::vector<int> first(n, 0);
  for (int s = 0; s < draws; ++s) ++first[static_cast<std::size_t>(data::SampleOrder(n, true, s).epoch(0)[0])];
  for (int k = 0; k < n; ++k) {
    INFO("sample " << k << " first " << first[static_cast<std::size_t>(k)] << " times");
    REQUIRE(std::abs(first[static_cast<std::size_t>(k)] - draws / n) < 340);
  }
}

TEST_CASE("the loader hands the same batches with prefetch on and off, on every rank", "[dataset][loader]") {
  auto ds = synthetic(13);
  const DeviceMesh mesh({2, 3}, {"dp", "sp"});
  const Layout layout = layout_of(*ds, mesh, {Shard(0), Shard(3)}, 4);
  const int steps = 9;  // 36 samples: the batches cross two epoch boundaries
  for (bool shuffle : {false, true}) {
    for (int r = 0; r < mesh.size(); ++r) {
      data::LoaderOptions off;
      off.prefetch = 0;
      off.shuffle = shuffle;
      data::Loader ref(ds, layout, r, nullptr, nullptr, off);
      std::vector<std::pair<std::string, std::string>> want;
      for (int s = 0; s < steps; ++s) {
        const data::Batch b = ref.take(s);
        REQUIRE(b.images.shape() == layout.local_shape(r));
        want.emplace_back(test::bytes_of(b.images), test::bytes_of(b.labels));
        // The reference itself: the dataset's rows in the order's samples.
        const data::Batch direct = ds->load_samples(ref.order().batch(s, 4), layout, r, nullptr);
        REQUIRE(test::bytes_of(direct.images) == want.back().first);
      }
      for (auto [prefetch, workers] : {std::pair{1, 1}, {2, 1}, {4, 3}, {3, 8}}) {
        INFO("shuffle " << shuffle << " rank " << r << " prefetch " << prefetch << " workers " << workers);
        data::LoaderOptions on = off;
        on.prefetch = prefetch;
        on.workers = workers;
        auto alloc = std::make_shared<core::Allocator>("loader test");
        data::Loader l(ds, layout, r, alloc, nullptr, on);
        for (int s = 0; s < steps; ++s) {
          const data::Batch b = l.take(s);
          REQUIRE(test::bytes_of(b.images) == want[static_cast<std::size_t>(s)].first);
          REQUIRE(test::bytes_of(b.labels) == want[static_cast<std::size_t>(s)].second);
        }
        // Its P + 1 slots are booked from construction on, as activations.
        const core::Shape ls = layout.local_shape(r);
        const std::size_t slot = std::size_t(core::shape_numel(ls)) * 4 + std::size_t(ls[0] * ls[2] * ls[3]) * 8;
        REQUIRE(alloc->stats().current_of(core::MemCategory::Activation) == slot * (prefetch + 1));
        // Jumping back (a resumed run) and forward restarts the queue at that step.
        REQUIRE(test::bytes_of(l.take(2).images) == want[2].first);
        REQUIRE(test::bytes_of(l.take(3).images) == want[3].first);
        REQUIRE(test::bytes_of(l.take(7).images) == want[7].first);
      }
    }
  }
}

TEST_CASE("a load that throws reaches take() for its step, and the step can be retried", "[dataset][loader]") {
  auto probe = std::make_shared<Probe>(synthetic(8, Task::Classify));
  probe->fail_call = 2;  // the third load: step 2 with one worker, in order
  const Layout layout = layout_of(*probe, DeviceMesh(), {core::Replicate()}, 2);
  data::LoaderOptions o;
  o.prefetch = 2;
  data::Loader l(probe, layout, 0, nullptr, nullptr, o);
  data::LoaderOptions off = o;
  off.prefetch = 0;
  data::Loader ref(synthetic(8, Task::Classify), layout, 0, nullptr, nullptr, off);
  REQUIRE(test::bytes_of(l.take(0).images) == test::bytes_of(ref.take(0).images));
  REQUIRE(test::bytes_of(l.take(1).images) == test::bytes_of(ref.take(1).images));
  REQUIRE_THROWS_WITH(l.take(2), Catch::Matchers::Contains("probe: a broken read"));
  REQUIRE(test::bytes_of(l.take(2).images) == test::bytes_of(ref.take(2).images));  // loaded again
  REQUIRE(test::bytes_of(l.take(3).images) == test::bytes_of(ref.take(3).images));
}

TEST_CASE("a loader stuck past its deadline names the step instead of hanging", "[dataset][loader]") {
  auto probe = std::make_shared<Probe>(synthetic(8, Task::Classify));
  probe->hang_from = 1;
  const Layout layout = layout_of(*probe, DeviceMesh(), {core::Replicate()}, 2);
  data::LoaderOptions o;
  o.prefetch = 1;
  o.timeout_s = 0.2;
  data::Loader l(probe, layout, 0, nullptr, nullptr, o);
  (void)l.take(0);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(l.take(1), Catch::Matchers::Contains("the batch of step 1 was not loaded within 0.2 s"));
  REQUIRE(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1500));
}

TEST_CASE("bad loader options and bad batches are refused with the field named", "[dataset][loader]") {
  auto ds = synthetic(8);
  const Layout layout = layout_of(*ds, DeviceMesh(), {core::Replicate()}, 2);
  data::LoaderOptions o;
  o.prefetch = -2;
  REQUIRE_THROWS_WITH(data::Loader(ds, layout, 0, nullptr, nullptr, o), Catch::Matchers::Contains("prefetch -2"));
  o.prefetch = -1;  // auto: none on the host
  REQUIRE(data::Loader(ds, layout, 0, nullptr, nullptr, o).options().prefetch == 0);
  o.prefetch = 2;
  o.workers = 0;
  REQUIRE_THROWS_WITH(data::Loader(ds, layout, 0, nullptr, nullptr, o), Catch::Matchers::Contains("loader_workers 0"));
  REQUIRE_THROWS_WITH(data::SampleOrder(0, true, 0), Catch::Matchers::Contains("0 samples"));
  data::Batch b = data::allocate_batch(layout, 0, Task::Segment, nullptr);
  REQUIRE_THROWS_WITH(ds->load_into(std::vector<std::int64_t>{0, 1, 2}, layout, 0, b),
                      Catch::Matchers::Contains("3 samples for a batch of 2"));
  REQUIRE_THROWS_WITH(ds->load_into(std::vector<std::int64_t>{0, 8}, layout, 0, b),
                      Catch::Matchers::Contains("asks for sample 8, which is outside [0, 8)"));
  data::Batch small = data::allocate_batch(layout_of(*ds, DeviceMesh(), {core::Replicate()}, 1), 0, Task::Segment, nullptr);
  REQUIRE_THROWS_WITH(ds->load_into(std::vector<std::int64_t>{0, 1}, layout, 0, small),
                      Catch::Matchers::Contains("does not hold this rank's part"));
}

TEST_CASE("with prefetch a slow dataset hides behind the consumer's work: max, not sum", "[dataset][loader]") {
  // Sleeps on both sides (the consumer's "step" and each load), so the figures do not depend on
  // how busy the cores are: 40 ms of loading and 40 ms of work per step take about 80 ms in turn
  // and about 40 ms with one batch loaded ahead.
  using namespace std::chrono;
  const auto load = milliseconds(40), work = milliseconds(40);
  auto probe = std::make_shared<Probe>(synthetic(8, Task::Classify), load);
  const Layout layout = layout_of(*probe, DeviceMesh(), {core::Replicate()}, 2);
  auto per_step = [&](int prefetch) {
    data::LoaderOptions o;
    o.prefetch = prefetch;
    data::Loader l(probe, layout, 0, nullptr, nullptr, o);
    (void)l.take(0);
    const auto t0 = steady_clock::now();
    const int steps = 10;
    for (int s = 1; s <= steps; ++s) {
      (void)l.take(s);
      std::this_thread::sleep_for(work);
    }
    return duration<double>(steady_clock::now() - t0).count() / steps;
  };
  const double sync = per_step(0), ahead = per_step(2);
  INFO("per step: in turn " << sync * 1e3 << " ms, prefetched " << ahead * 1e3 << " ms");
  REQUIRE(sync >= 0.080);          // sleeps cannot be shortened
  REQUIRE(ahead < 0.040 + 0.020);  // max(load, work) plus a scheduling allowance
}
