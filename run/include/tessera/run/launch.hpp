// What `tessera launch` needs of the rendezvous: the job's store, served by the launcher of node 0,
// and a client of it, without naming the TCP store (backends/comm/common) in a front end.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

namespace tessera::run {

/// The store a launched job's ranks rendezvous through (a TCP store server), served from this
/// process until destroyed. It watches its ranks: one whose rank connection closes without a
/// goodbye, or (with heartbeat_timeout) whose heartbeats stop, is lost.
class StoreServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";  ///< listen address
    int port = 0;                    ///< 0: any free port (see port())
    std::string token;               ///< the job's token: clients must present it
    /// Where the server's log lines go (connections dropped, ranks lost); empty: core::report.
    std::function<void(const std::string&)> log;
    /// A rank that sent a heartbeat and then none for this long is lost ("rank R stopped
    /// answering: no heartbeat for X s ..."). 0: no deadline, only closed connections count.
    std::chrono::milliseconds heartbeat_timeout{0};
    /// Called once per lost rank with the logged reason, from a server thread, not under the
    /// server's lock (it may call get/set/ranks/abort). Must not throw.
    std::function<void(int rank, const std::string& why)> on_rank_lost;
    /// true: a lost rank sets the job's abort flag (every rank stops, naming it). false: the host
    /// decides, through on_rank_lost.
    bool abort_on_rank_lost = true;
  };
  /// Listens at once; throws BackendError naming the address when it cannot.
  explicit StoreServer(Options options);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  /// The port it listens on (the one picked when Options::port was 0).
  int port() const noexcept;
  /// Sets the job's abort flag with `reason`: every rank's pending and later waits fail with it.
  void abort(const std::string& reason);
  /// The abort flag's reason, or "" when the job was not aborted.
  std::string abort_reason() const;
  /// The value of `key` now, or nothing when unset. Does not wait.
  std::optional<std::string> get(const std::string& key) const;
  /// Sets `key`, waking the clients waiting for it.
  void set(const std::string& key, const std::string& value);
  /// The ranks whose rank connection is open and who are not lost.
  std::set<int> ranks() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A client of a StoreServer, possibly in another process or on another host. With rank >= 0 it
/// is watched: closing without destruction (killed) or, with heartbeat_interval, going silent
/// makes the server report that rank lost. An elastic launcher's member launchers join the
/// leader's store this way, rank = their member id.
class StoreClient {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 0;
    std::string token;
    int rank = -1;  ///< -1: not a rank (not watched)
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
    /// A rank sends a heartbeat this often from a thread of its own; 0: none.
    std::chrono::milliseconds heartbeat_interval{0};
  };
  /// Connects, retrying until connect_timeout. Throws InvalidArgument when the server refuses
  /// (wrong token, rank already joined) and TimeoutError when no server answers.
  explicit StoreClient(Options options);
  /// Stops the heartbeats and says goodbye (not a loss). Never throws.
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  void set(const std::string& key, const std::string& value);
  /// Waits up to `timeout` for `key`. Throws TimeoutError naming the key when it did not appear,
  /// BackendError when the job was aborted meanwhile or the store is gone.
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  /// Adds `delta` to the integer at `key` (0 when unset); returns the new value.
  std::int64_t add(const std::string& key, std::int64_t delta);
  /// Whether `key` is set. Does not wait.
  bool check(const std::string& key);
  /// Sets the job's abort flag (first reason wins). Best effort, never throws.
  void abort(const std::string& reason) noexcept;
  /// The abort flag's reason once it is set (or the store was lost), else "". Does not wait.
  std::string abort_reason();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::run
