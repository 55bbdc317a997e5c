// The input pipeline between a dataset and one rank's training loop: the order samples are visited
// in (per-epoch shuffles every rank agrees on), and a bounded producer–consumer queue of batch
// slots that loader threads fill ahead of the step being trained (docs/training.md, "Input
// pipeline").
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/core/allocator.hpp"
#include "tessera/core/layout.hpp"
#include "tessera/data/dataset.hpp"

namespace tessera::data {

/// The order a run visits its samples in. Sample positions run on across batches and epochs:
/// batch `step` holds positions step·B … step·B+B−1, position p lies in epoch p / size at place
/// p mod size. Without shuffling, place i holds sample i (batches wrap around the dataset); with
/// it, epoch e holds a permutation of 0 … size−1 drawn from (seed, e) alone, so every rank of a run
/// computes the same order without communicating, and a resumed run continues it exactly.
/// Thread-safe (the permutations of the last epochs asked for are cached).
class SampleOrder {
 public:
  /// Throws InvalidArgument for size < 1.
  SampleOrder(std::int64_t size, bool shuffle, std::uint64_t seed);
  SampleOrder(const SampleOrder&) = delete;
  SampleOrder& operator=(const SampleOrder&) = delete;

  /// The samples of batch `step` (step >= 0): `batch` global indices, row n of the batch first.
  std::vector<std::int64_t> batch(std::int64_t step, std::int64_t batch) const;
  /// The samples of epoch `epoch` in order: 0 … size−1 unshuffled, else the epoch's permutation.
  std::vector<std::int64_t> epoch(std::int64_t epoch) const;
  std::int64_t size() const noexcept { return size_; }
  bool shuffled() const noexcept { return shuffle_; }

 private:
  std::shared_ptr<const std::vector<std::int64_t>> permutation(std::int64_t epoch) const;

  std::int64_t size_;
  bool shuffle_;
  std::uint64_t seed_;
  mutable std::mutex mu_;
  mutable std::vector<std::pair<std::int64_t, std::shared_ptr<const std::vector<std::int64_t>>>> cache_;
};

struct LoaderOptions {
  /// Batches loaded ahead of the step being trained. 0: no queue and no threads; each step loads
  /// its own batch in the training thread when it starts (the synchronous reference). -1, auto:
  /// 2 when take() hands device tensors, 0 on the host, where the compute threads already keep
  /// every core busy and a loader thread beside them only competes (docs/training.md).
  int prefetch = -1;
  /// Loader threads (with prefetch > 0). Each loads whole batches (this rank's part of them), the
  /// next step not yet loaded first; more threads than prefetch have nothing to do.
  int workers = 1;
  /// Shuffle the samples every epoch (SampleOrder); off: index order.
  bool shuffle = true;
  std::uint64_t seed = 0;
  /// How long take() waits for a batch before it throws TimeoutError naming the step (a loader
  /// stuck on a file system). Seconds.
  double timeout_s = 600;
};

/// Throws InvalidArgument naming the field when `o` is out of range (prefetch < 0, workers < 1,
/// timeout not positive). `who` prefixes the message ("trainer").
void check_loader_options(const LoaderOptions& o, const std::string& who);

/// One rank's input pipeline. Batches are identical whatever the options but shuffle and seed: a
/// batch depends only on its step, so a run with prefetch is bit-for-bit the run without.
///
/// With prefetch P > 0 the loader owns P + 1 batch slots, allocated once at construction (so the
/// run's memory, and the simulator's, books them from the start): the slot of the step being
/// trained and P filled ahead. Loader threads start at the first take(); the step after the one
/// taken last is loaded first. A slot is reused only once a later step has been taken, so the
/// batch take() returned stays intact until the next take().
///
/// With a device allocator, take() hands device tensors: the loader threads fill page-locked host
/// slots and copy each into its device slot themselves (DeviceMemory::upload: a copy stream,
/// ordered after the work already issued on the compute stream), so the copy of the next batch
/// overlaps the step being trained. Without prefetch the batch is copied by the training thread.
///
/// On a meta host allocator (the simulator's replay) nothing is loaded and no thread starts: take()
/// returns the slot's shapes, booked exactly as the runtime books them.
class Loader {
 public:
  /// `host`: where batches are loaded (null: unbooked host memory). `device`: where take() hands
  /// them; null or a host allocator: take() hands the host batch. Throws InvalidArgument for bad
  /// options (check_loader_options).
  Loader(std::shared_ptr<const Dataset> dataset, core::Layout layout, int rank, core::AllocatorPtr host,
         core::AllocatorPtr device, LoaderOptions options);
  ~Loader();  ///< stops the threads; a load in progress finishes first
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// The batch of step `step` (this rank's part), waiting for it if it is not loaded yet. Steps
  /// are taken in increasing order; any other step (a resumed run, a retried step) drops what was
  /// loaded ahead and continues from there. A load that threw rethrows here, for its step.
  Batch take(std::int64_t step);

  /// Seconds the loader spent producing the batch take() returned last (its load, and its copy to
  /// the device): above the step time, the loader cannot keep up; add workers.
  double last_load_seconds() const noexcept { return last_load_s_; }
  /// The options in effect (prefetch resolved when it was auto).
  const LoaderOptions& options() const noexcept { return opt_; }
  const SampleOrder& order() const noexcept { return order_; }

 private:
  struct State;
  Batch load_now(std::int64_t step);
  void worker();
  void start_threads();

  std::shared_ptr<const Dataset> data_;
  core::Layout layout_;
  int rank_;
  core::AllocatorPtr host_, device_;
  LoaderOptions opt_;
  SampleOrder order_;
  double last_load_s_ = 0;
  std::unique_ptr<State> st_;
};

}  // namespace tessera::data
