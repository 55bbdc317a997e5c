// One process's UCX state shared by a world group and its sub-groups: context, worker, one
// endpoint per world rank, the posted operations, and the one wait loop (yield, then block on
// the worker's event fd and the store's abort fd) every blocking call goes through.
#pragma once

#include <sched.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "tessera/comm/backend.hpp"
#include "tessera/comm/store.hpp"
#include "tessera/core/error.hpp"

namespace tessera::comm::ucx {

using Clock = std::chrono::steady_clock;

/// One send or receive posted on the worker. Owned by the operation that posted it; its address
/// must stay stable until it completed or was cancelled.
struct Op {
  enum class State : std::uint8_t { Queued, Active, Done, Failed };
  std::uint64_t tag = 0;
  int peer = -1;  ///< world rank
  State state = State::Queued;
  bool is_send = false;
  bool size_mismatch = false;   ///< a p2p receive of the wrong size (InvalidArgument)
  bool up_to = false;           ///< receive: expect_bytes is a capacity, a shorter message is whole
  std::uint8_t elem_bytes = 1;  ///< element size, for messages in elements
  // send: contiguous memory (UCX's zero-copy rendezvous, cma between processes of a machine)
  const void* send_data = nullptr;
  std::size_t send_bytes = 0;
  // receive: the destination and its size (or, with up_to, its capacity)
  void* dst = nullptr;
  std::size_t expect_bytes = 0;
  std::size_t got_bytes = 0;
  ucp_tag_recv_info_t info{};  ///< a posted receive's completion (length = the sender's bytes)
  void* req = nullptr;
  std::string error;   ///< why it failed
  int what_peer = -1;  ///< the group rank and (batch_p2p) user tag, formatted only on failure
  std::int64_t what_tag = -1;
  /// batch_p2p's "receive from rank 0 tag 9" / "send to rank 1 tag 9", or (no tag) a
  /// collective's "rank 0" / "send to rank 1".
  std::string describe() const {
    if (what_tag < 0) return detail::cat(is_send ? "send to rank " : "rank ", what_peer);
    return detail::cat(is_send ? "send to rank " : "receive from rank ", what_peer, " tag ",
                       what_tag);
  }
};

/// The worker's lock: taken on every poll, almost always uncontended (one thread per group; a
/// process's groups share the worker). A test-and-set lock costs one atomic exchange; a waiter
/// spins briefly, then yields (progress can hold it through a large copy).
class SpinLock {
 public:
  void lock() noexcept {
    for (int spins = 0; flag_.test_and_set(std::memory_order_acquire); ++spins)
      if (spins >= 64) sched_yield();
  }
  void unlock() noexcept { flag_.clear(std::memory_order_release); }

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

class Context {
 public:
  /// Collective over the world: creates the worker, publishes its address in the store and
  /// connects to every rank (TimeoutError naming the ranks whose address never appeared).
  Context(std::shared_ptr<Rendezvous> rdzv, int rank, int size, std::chrono::milliseconds timeout);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  Store& store() { return store_; }

  /// Posts receives, then sends, to UCX at once (its expected queue matches receives in
  /// posting order per tag).
  void post(std::span<Op* const> ops);
  /// Progresses until every op is Done or Failed, the deadline passes, or the job is aborted.
  /// Returns "" when all completed; otherwise fills `pending` with the ops still open and
  /// returns why it stopped ("timeout" or the abort reason prefixed "abort:").
  std::string wait(std::span<Op* const> ops, Clock::time_point deadline);
  /// As wait, with the deadline `timeout` from now (the clock is read only if the ops are open).
  std::string wait_for(std::span<Op* const> ops, std::chrono::milliseconds timeout);
  /// Non-blocking: progresses once; true when all ops are Done or Failed.
  bool test(std::span<Op* const> ops);
  /// Withdraws ops that have not completed (requests cancelled). noexcept.
  void cancel(std::span<Op* const> ops) noexcept;
  /// The job's abort reason, or "" (checks the store's fd without blocking).
  std::string abort_reason();
  /// Ends every wait of this process's groups with `why` as the abort reason (a pending
  /// collective's Work was destroyed: its task must stop using the caller's buffers). The job's
  /// store is not told; the caller's failure handling does that.
  void abandon(const std::string& why);
  /// Failure of the endpoint to a world rank, or "".
  std::string peer_error(int world_rank);
  /// While held (by a posted batch with a rendezvous-sized message, which moves only while both
  /// sides progress the worker), a helper thread progresses the worker, so the batch moves while
  /// its caller computes. Every hold is released once (release_progress is noexcept).
  void hold_progress();
  void release_progress() noexcept;

 private:
  void shutdown() noexcept;
  void progress_loop() noexcept;
  /// After progress that made events: wakes the threads asleep in wait_from (their operations
  /// may be among those completed).
  void wake_sleepers() noexcept;
  std::string wait_from(std::span<Op* const> ops, Clock::time_point start,
                        Clock::time_point deadline);
  void update_locked(Op& op);
  void post_recv_locked(Op& op);
  void finish_recv_locked(Op& op, ucs_status_t st);

  std::shared_ptr<Rendezvous> rdzv_;  // keeps the store alive
  Store& store_;
  int rank_, size_;
  SpinLock mu_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> eps_;
  std::vector<bool> peer_mode_;      // per world rank: the endpoint has UCP_ERR_HANDLING_MODE_PEER
  bool yield_when_polling_ = false;  // more ranks on this machine than cores
  struct PeerErr {
    Context* self;
    int rank;
  };
  std::vector<std::unique_ptr<PeerErr>> err_args_;
  std::vector<std::string> peer_errors_;
  int epfd_ = -1;
  int efd_ = -1;
  int abort_fd_ = -1;
  int wake_fd_ = -1;              ///< semaphore eventfd: a token per sleeper to wake
  std::atomic<int> sleepers_{0};  ///< threads blocked in wait_from's epoll_wait
  // The progress helper (hold_progress): its own epoll set (the worker's fd only), its thread.
  int helper_epfd_ = -1;
  std::mutex helper_mu_;
  std::condition_variable helper_cv_;
  int holds_ = 0;
  bool helper_stop_ = false;
  std::thread helper_;
  std::mutex abort_mu_;  ///< guards abort_ (the collective threads and the caller read it)
  std::string abort_;
  bool failed_ = false;

 public:
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);
};

}  // namespace tessera::comm::ucx
