// The key-value store seam that network backends rendezvous through (worker addresses, unique ids,
// barriers, the job-wide abort flag). The TCP implementation lives in backends/comm/common.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::comm {

/// A job-wide key-value store shared by every rank (torch's c10d Store, reduced).
/// Threading: implementations are safe to call from several threads at once.
/// Failure: every blocking call has a deadline; on expiry it throws TimeoutError naming the
/// key(s) still missing. A lost connection throws BackendError saying which store was lost.
class Store {
 public:
  virtual ~Store() = default;
  /// Sets `key` (overwrites); wakes every waiter on it.
  virtual void set(const std::string& key, const std::string& value) = 0;
  /// Blocks until `key` exists, then returns its value (TimeoutError at the deadline).
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  /// Adds `delta` to the integer at `key` (absent = 0) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  /// Non-blocking: whether `key` exists.
  virtual bool check(const std::string& key) = 0;
  /// Blocks until every key exists; the TimeoutError lists all keys still missing.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  /// Marks the whole job as failed with `reason` (first reason wins). Never throws.
  virtual void abort(const std::string& reason) noexcept = 0;
  /// Non-blocking: the job's abort reason, or "" while nobody aborted.
  virtual std::string abort_reason() = 0;
  /// A file descriptor that becomes readable when the job is aborted (for poll/epoll loops), or
  /// -1 when this store has none (then poll abort_reason()).
  virtual int abort_fd() { return -1; }
};

/// The key every rank's abort() sets.
inline constexpr const char* kAbortKey = "tessera/abort";

}  // namespace tessera::comm
