// Loader: P + 1 batch slots, loader threads that fill the next steps' slots, and take(), which
// waits (with a deadline) for its step's slot. See loader.hpp for the contract.
#include "tessera/data/loader.hpp"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <thread>

#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"

namespace tessera::data {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// The contiguous bytes of a slot tensor (slots are allocated contiguous).
std::size_t bytes_of(const core::Tensor& t) { return t.nbytes(); }

}  // namespace

void check_loader_options(const LoaderOptions& o, const std::string& who) {
  TESSERA_CHECK(o.prefetch >= -1 && o.prefetch <= 64, who, ": prefetch ", o.prefetch, " is outside [0, 64] (batches "
                "loaded ahead of the step being trained; 0 loads each batch when its step starts; -1: auto)");
  TESSERA_CHECK(o.workers >= 1 && o.workers <= 64, who, ": loader_workers ", o.workers, " is outside [1, 64] "
                "(threads that load batches ahead; with prefetch 0 the training thread loads)");
  TESSERA_CHECK(o.timeout_s > 0, who, ": the loader's timeout ", o.timeout_s, " s must be positive");
}

/// One slot: its batch (host, and on the device when take() hands device tensors) and what it
/// holds now.
struct Slot {
  Batch host, device;
  std::int64_t step = -1;     ///< the step it holds or is being loaded with; -1: none
  bool ready = false;         ///< loaded (or failed: error)
  std::exception_ptr error;
  double seconds = 0;         ///< the load's (and upload's) duration
  std::vector<void*> pinned;  ///< host blocks page-locked for the upload
};

struct Loader::State {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Slot> slots;
  std::vector<std::thread> threads;
  std::int64_t taken = -1;     ///< the step take() returned last; steps up to taken + P may load
  std::int64_t next = -1;      ///< the next step a thread will load; -1: not started
  std::uint64_t generation = 0;  ///< bumped when the queue restarts at another step
  int in_flight = 0;           ///< loads running now
  bool stop = false;
};

Loader::Loader(std::shared_ptr<const Dataset> dataset, core::Layout layout, int rank, core::AllocatorPtr host,
               core::AllocatorPtr device, LoaderOptions options)
    : data_(std::move(dataset)), layout_(std::move(layout)), rank_(rank), host_(std::move(host)),
      device_(device && device->space() != core::MemorySpace::Host ? std::move(device) : nullptr),
      opt_(options), order_(data_ ? data_->size() : 1, options.shuffle, options.seed), st_(std::make_unique<State>()) {
  TESSERA_CHECK(data_ != nullptr, "loader: no dataset");
  check_loader_options(opt_, "loader");
  if (opt_.prefetch < 0) opt_.prefetch = device_ ? 2 : 0;
  TESSERA_CHECK(rank_ >= 0 && rank_ < layout_.mesh().size(), "loader: rank ", rank_, " is not in the batch layout's mesh ",
                layout_.mesh().to_string());
  if (opt_.prefetch == 0) return;
  // A device run loads into page-locked host memory of the loader's own (its bytes are not the
  // device's); every slot is booked from the start.
  if (device_ && !host_) host_ = std::make_shared<core::Allocator>("loader rank " + std::to_string(rank_));
  core::DeviceMemory* dm = device_ ? device_->device() : nullptr;
  st_->slots.resize(static_cast<std::size_t>(opt_.prefetch) + 1);
  for (Slot& s : st_->slots) {
    s.host = allocate_batch(layout_, rank_, data_->task(), host_);
    if (!device_) continue;
    s.device = allocate_batch(layout_, rank_, data_->task(), device_);
    for (core::Tensor* t : {&s.host.images, &s.host.labels})
      if (dm->pin_host(t->raw_data(), bytes_of(*t))) s.pinned.push_back(t->raw_data());
  }
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    st_->stop = true;
  }
  st_->cv.notify_all();
  for (std::thread& t : st_->threads) t.join();
  if (device_)
    for (Slot& s : st_->slots)
      for (void* p : s.pinned) device_->device()->unpin_host(p);
}

Batch Loader::load_now(std::int64_t step) {
  const auto t0 = Clock::now();
  const std::int64_t batch = layout_.global_shape()[0];
  const std::vector<std::int64_t> samples = order_.batch(step, batch);
  Batch b = allocate_batch(layout_, rank_, data_->task(), device_ ? nullptr : host_);
  data_->load_into_at(samples, step * batch, layout_, rank_, b);
  if (device_) {
    b.images = b.images.to(device_, core::MemCategory::Activation);
    b.labels = b.labels.to(device_, core::MemCategory::Activation);
  }
  last_load_s_ = seconds_since(t0);
  return b;
}

void Loader::start_threads() {
  for (int i = 0; i < opt_.workers; ++i) st_->threads.emplace_back([this] { worker(); });
}

void Loader::worker() {
  State& st = *st_;
  const auto n_slots = static_cast<std::int64_t>(st.slots.size());
  const std::int64_t batch = layout_.global_shape()[0];
  std::unique_lock<std::mutex> lock(st.mu);
  for (;;) {
    st.cv.wait(lock, [&] { return st.stop || (st.next >= 0 && st.next <= st.taken + opt_.prefetch); });
    if (st.stop) return;
    const std::int64_t step = st.next++;
    const std::uint64_t generation = st.generation;
    Slot& slot = st.slots[static_cast<std::size_t>(step % n_slots)];
    slot.step = step;
    slot.ready = false;
    slot.error = nullptr;
    ++st.in_flight;
    lock.unlock();
    // The slot's previous step is older than the one taken last, so nobody reads it any more.
    const auto t0 = Clock::now();
    std::exception_ptr error;
    try {
      const std::vector<std::int64_t> samples = order_.batch(step, batch);
      data_->load_into_at(samples, step * batch, layout_, rank_, slot.host);
      if (device_) {
        core::DeviceMemory* dm = device_->device();
        dm->upload(slot.device.images.raw_data(), slot.host.images.raw_data(), bytes_of(slot.host.images));
        dm->upload(slot.device.labels.raw_data(), slot.host.labels.raw_data(), bytes_of(slot.host.labels));
      }
    } catch (...) {
      error = std::current_exception();
    }
    const double seconds = seconds_since(t0);
    lock.lock();
    --st.in_flight;
    if (generation == st.generation) {
      slot.ready = true;
      slot.error = error;
      slot.seconds = seconds;
    }
    st.cv.notify_all();
  }
}

Batch Loader::take(std::int64_t step) {
  TESSERA_CHECK(step >= 0, "loader: step ", step, " is negative");
  if (opt_.prefetch == 0) return load_now(step);
  State& st = *st_;
  const auto n_slots = static_cast<std::int64_t>(st.slots.size());
  Slot& slot = st.slots[static_cast<std::size_t>(step % n_slots)];
  if (host_ && host_->is_meta()) return device_ ? slot.device : slot.host;  // the simulator: shapes only

  std::unique_lock<std::mutex> lock(st.mu);
  if (st.next < 0 || step != st.taken + 1) {
    // First take, or not the step after the last one: drop what was loaded ahead (loads in
    // progress finish into slots nobody reads) and restart the queue at `step`.
    ++st.generation;
    st.next = -1;
    st.cv.wait(lock, [&] { return st.in_flight == 0; });
    for (Slot& s : st.slots) s.step = -1, s.ready = false, s.error = nullptr;
    st.next = step;
    if (st.threads.empty()) start_threads();
  }
  st.taken = step;  // frees the slot of step − 1 for step + P
  st.cv.notify_all();
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.timeout_s));
  const bool loaded = st.cv.wait_until(lock, deadline, [&] { return slot.step == step && slot.ready; });
  if (!loaded) {
    st.taken = step - 1;  // a later take of this step waits again
    throw TimeoutError("loader", detail::cat("rank ", rank_, ": the batch of step ", step, " was not loaded within ",
                                             opt_.timeout_s, " s (", opt_.workers, " loader thread(s), prefetch ",
                                             opt_.prefetch, "): a read is stuck or far too slow. Check the data's "
                                             "file system, or raise the loader's timeout"));
  }
  if (slot.error) {
    std::exception_ptr e = slot.error;
    st.next = -1;  // the next take restarts the queue (a retried step loads again)
    st.cv.notify_all();
    lock.unlock();
    std::rethrow_exception(e);
  }
  last_load_s_ = slot.seconds;
  return device_ ? slot.device : slot.host;
}

}  // namespace tessera::data
