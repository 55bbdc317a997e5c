// ThreadPool: workers wait for a generation number to change, then take task indices atomically.
#include "thread_pool.hpp"

namespace tessera::compute::cpu {

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads < 1 ? 1 : num_threads) {}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::start_workers() {
  if (!workers_.empty()) return;
  workers_.reserve(num_threads_ - 1);
  for (int w = 1; w < num_threads_; ++w) workers_.emplace_back([this, w] { worker_loop(w); });
}

void ThreadPool::take_tasks(int worker) {
  for (int t = next_task_.fetch_add(1); t < num_tasks_; t = next_task_.fetch_add(1)) {
    try {
      (*fn_)(t, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void ThreadPool::worker_loop(int worker) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    take_tasks(worker);
    std::lock_guard<std::mutex> lock(mu_);
    if (--busy_workers_ == 0) done_cv_.notify_one();
  }
}

void ThreadPool::run(int num_tasks, const std::function<void(int, int)>& fn) {
  if (num_tasks <= 0) return;
  std::lock_guard<std::mutex> run_lock(run_mu_);
  if (num_threads_ == 1 || num_tasks == 1) {
    for (int t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  start_workers();
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    num_tasks_ = num_tasks;
    next_task_.store(0);
    busy_workers_ = static_cast<int>(workers_.size());
    error_ = nullptr;
    ++generation_;
  }
  start_cv_.notify_all();
  take_tasks(0);
  std::exception_ptr err;
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return busy_workers_ == 0; });
    fn_ = nullptr;
    err = error_;
    error_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace tessera::compute::cpu
