// A small fixed-size thread pool owned by one CpuBackend: runs indexed tasks, caller included.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::compute::cpu {

/// Runs `fn(task, worker)` for every task index in [0, num_tasks) on up to size() threads: the
/// calling thread is worker 0, the others are started on the first parallel run and sleep on a
/// condition variable between runs (no spinning, so several ranks can share a few cores).
///
/// Which worker runs which task varies from run to run; kernels therefore make a task's result
/// depend on its index only (per-worker scratch is for temporaries), which keeps results
/// deterministic. A pool of size 1, or a run of one task, executes inline and starts no thread.
/// One run at a time (a second caller waits). The first exception thrown by a task is rethrown
/// by run() after all tasks have finished.
class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Number of threads a run may use (the caller included).
  int size() const noexcept { return num_threads_; }
  /// Runs the tasks and blocks until all are done.
  void run(int num_tasks, const std::function<void(int task, int worker)>& fn);

 private:
  void start_workers();
  void worker_loop(int worker);
  void take_tasks(int worker);

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex run_mu_;  // serialises run()
  std::mutex mu_;      // guards everything below except next_task_
  std::condition_variable start_cv_, done_cv_;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  int busy_workers_ = 0;
  int num_tasks_ = 0;
  const std::function<void(int, int)>* fn_ = nullptr;
  std::atomic<int> next_task_{0};
  std::exception_ptr error_;
};

}  // namespace tessera::compute::cpu
