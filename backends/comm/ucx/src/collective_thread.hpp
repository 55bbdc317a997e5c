// CollectiveThread: runs one group's collectives, in the order they were posted, on a thread of
// their own, so a posted collective moves while the caller computes (Capabilities::
// overlaps_compute). The caller keeps the group's batch_p2p; both share the process's worker
// under its lock (context.hpp).
//
// Why a thread and not progress from the caller: a collective here is a sequence of rounds (a
// ring all_reduce of P ranks is 2(P−1) rounds of chunks, each round's sends built from the last
// round's receives), so it needs someone to run code between the rounds. Progress calls from the
// compute loop would need every algorithm rewritten as a state machine and still would not run
// during one long kernel. The thread sleeps in the worker's wait (epoll) between rounds, so it
// costs a core only while data is being reduced or copied — work the caller's post did before.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "tessera/comm/backend.hpp"

namespace tessera::comm::ucx {

class CollectiveThread {
 public:
  /// `abandon` is called when a pending task's Work is destroyed (its caller unwinding from an
  /// exception): it must make the task's waits end (UcxBackend: Context::abandon), since the
  /// task uses the caller's buffers; the Work's destructor then waits for the task to return.
  explicit CollectiveThread(std::function<void()> abandon) : abandon_(std::move(abandon)) {}
  /// Runs what is queued to its end (each task has the backend's deadlines), then joins.
  ~CollectiveThread();
  CollectiveThread(const CollectiveThread&) = delete;
  CollectiveThread& operator=(const CollectiveThread&) = delete;

  /// Runs `task` after every task posted before it. With `inline_when_idle` and nothing queued
  /// or running, runs it here instead, before returning (a small collective: a thread hand-off
  /// costs more than the operation). The Work completes when the task returned (its exception,
  /// if any, is rethrown by wait()) and reports when it ran (Work::moved).
  WorkPtr post(std::function<void()> task, bool inline_when_idle);

  struct Task;  ///< one posted collective and its outcome (collective_thread.cpp)

 private:
  void run() noexcept;

  std::function<void()> abandon_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool busy_ = false;  ///< a task is running (on the thread or inline)
  bool stop_ = false;
  std::thread thread_;  ///< started by the first queued task
};

}  // namespace tessera::comm::ucx
