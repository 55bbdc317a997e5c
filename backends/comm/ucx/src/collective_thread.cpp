// CollectiveThread: a queue of collectives and the thread that runs them in post order.
#include "collective_thread.hpp"

#include <pthread.h>

namespace tessera::comm::ucx {

struct CollectiveThread::Task {
  explicit Task(std::function<void()> f) : fn(std::move(f)) {}

  void run() noexcept {
    const auto t0 = std::chrono::steady_clock::now();
    std::exception_ptr e;
    try {
      fn();
    } catch (...) {
      e = std::current_exception();
    }
    fn = nullptr;  // drops what it captured before anyone is told
    const auto t1 = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mu);
      error = e;
      moved = {t0, t1};
      done = true;
    }
    cv.notify_all();
  }

  std::function<void()> fn;
  const std::function<void()>* abandon = nullptr;  ///< the thread's (it outlives its tasks)
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  Moved moved;
};

namespace {

/// The caller's handle of a posted task.
class TaskWork final : public Work {
 public:
  explicit TaskWork(std::shared_ptr<CollectiveThread::Task> t) : t_(std::move(t)) {}
  ~TaskWork() override {
    // The task reads and writes the caller's buffers: they must outlive it. Destroyed while the
    // task is pending (the caller is unwinding), make it stop rather than wait for its peers.
    std::unique_lock lock(t_->mu);
    if (!t_->done && t_->abandon && *t_->abandon) {
      lock.unlock();
      (*t_->abandon)();
      lock.lock();
    }
    t_->cv.wait(lock, [&] { return t_->done; });
  }
  bool is_completed() override {
    std::lock_guard lock(t_->mu);
    return t_->done;
  }
  // No deadline of its own: every round of the task has the backend's, so the task ends (with
  // a TimeoutError naming the missing rank) no later than the rounds queued before it allow.
  void wait() override {
    std::unique_lock lock(t_->mu);
    t_->cv.wait(lock, [&] { return t_->done; });
    if (t_->error) std::rethrow_exception(t_->error);
  }
  std::optional<Moved> moved() const override {
    std::lock_guard lock(t_->mu);
    if (!t_->done || t_->error) return std::nullopt;
    return t_->moved;
  }

 private:
  std::shared_ptr<CollectiveThread::Task> t_;
};

}  // namespace

CollectiveThread::~CollectiveThread() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

WorkPtr CollectiveThread::post(std::function<void()> task, bool inline_when_idle) {
  auto t = std::make_shared<Task>(std::move(task));
  t->abandon = &abandon_;
  {
    std::unique_lock lock(mu_);
    if (inline_when_idle && !busy_ && queue_.empty()) {
      busy_ = true;
      lock.unlock();
      t->run();
      lock.lock();
      busy_ = false;
      return std::make_unique<TaskWork>(std::move(t));
    }
    queue_.push_back(t);
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { run(); });
      pthread_setname_np(thread_.native_handle(), "tessera-ucx-col");  // for top, perf, gdb
    }
  }
  cv_.notify_all();
  return std::make_unique<TaskWork>(std::move(t));
}

void CollectiveThread::run() noexcept {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (!queue_.empty() && !busy_); });
    if (queue_.empty()) return;  // stopping, and everything posted has run
    std::shared_ptr<Task> t = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    t->run();
    lock.lock();
    busy_ = false;
  }
}

}  // namespace tessera::comm::ucx
