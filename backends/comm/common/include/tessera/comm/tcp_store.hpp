// A small TCP key-value store: the server (run by rank 0 or the launcher) and the client every
// rank uses. std + POSIX sockets only. Protocol: docs/launching.md ("the store").
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "tessera/comm/store.hpp"

namespace tessera::comm {

/// The serving side. Threads: one acceptor plus one per connection, and a deadline monitor when
/// heartbeats are watched. Clients must greet with the job's token; a wrong token, garbage or an
/// oversized frame drops that connection (logged with the reason) and the server carries on.
/// A rank is lost when its rank connection closes without a goodbye (killed, crashed) or, with
/// heartbeat_timeout, when it sent heartbeats and then none for that long (stopped, hung, host
/// unreachable): the server logs it, calls on_rank_lost and (by default) sets the abort key naming
/// the rank.
class TcpStoreServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";  ///< listen address (loopback unless told otherwise)
    int port = 0;                    ///< 0: any free port (see port())
    std::string token;               ///< clients must present it
    int adopt_fd = -1;               ///< a socket already listening (bound before a fork), or -1
    /// Where the server's log lines go (default: stderr, prefixed "tessera store: ").
    std::function<void(const std::string&)> log;
    /// A rank that has sent one heartbeat and then none for this long, while its rank connection
    /// is open, is lost (its rank connection is then shut down). 0: no deadline.
    std::chrono::milliseconds heartbeat_timeout{0};
    /// Called once per lost rank with the reason the server logged, from a server thread and not
    /// under the server's lock (it may call get/set/ranks/abort). Must not throw.
    std::function<void(int rank, const std::string& why)> on_rank_lost{};
    /// true: a lost rank aborts the job (the abort key names it). false: only the log line and
    /// on_rank_lost, the host decides (an elastic launcher watching its member launchers).
    bool abort_on_rank_lost = true;
  };
  explicit TcpStoreServer(Options options);
  /// Stops: closes every connection and joins the threads. Never throws.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const noexcept;
  /// Blocks until no rank connection is open or `timeout` passed; true when none is open.
  bool wait_until_ranks_left(std::chrono::milliseconds timeout);
  /// Number of rank connections currently open.
  int ranks_connected() const;
  /// The ranks with an open rank connection that are not lost.
  std::set<int> ranks() const;
  /// Direct access for the host (e.g. the launcher reading the abort reason).
  std::string abort_reason() const;
  void abort(const std::string& reason);
  /// The value of `key`, or nothing when it is not set. Does not wait.
  std::optional<std::string> get(const std::string& key) const;
  /// Sets `key`, waking the clients waiting for it.
  void set(const std::string& key, const std::string& value);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

/// The client side of a TcpStoreServer: one request connection (serialised by a mutex) plus a
/// watcher connection that waits for the abort key, whose fd abort_fd() exposes, and for a rank
/// with heartbeat_interval a heartbeat connection fed by a thread of its own (so a rank blocked in
/// a long request, or in its own computation, still shows it is alive).
class TcpStoreClient final : public Store {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 0;
    std::string token;
    int rank = -1;  ///< -1: not a rank (a tool or the launcher); ranks are watched for deaths
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
    /// A rank (rank >= 0) sends a heartbeat this often; 0: none (the server then never takes it
    /// for hung, only for dead when its connection closes).
    std::chrono::milliseconds heartbeat_interval{0};
  };
  /// Connects (retrying until connect_timeout). Throws InvalidArgument when the token is refused
  /// and TimeoutError when no server answers.
  explicit TcpStoreClient(Options options);
  /// Stops the heartbeats, says goodbye (so the server does not take this rank for dead) and
  /// closes. Never throws.
  ~TcpStoreClient() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  bool check(const std::string& key) override;
  void erase(const std::string& key);
  void abort(const std::string& reason) noexcept override;
  std::string abort_reason() override;
  int abort_fd() override { return watch_fd_; }
  std::string address() const;

 private:
  int open_connection(bool rank_connection);
  std::string request(const std::string& body, std::chrono::milliseconds io_timeout);
  void start_heartbeats();
  void stop_heartbeats() noexcept;

  Options options_;
  std::mutex mu_;
  int fd_ = -1;
  int watch_fd_ = -1;
  std::mutex watch_mu_;
  std::string abort_reason_;
  struct Heartbeat;  // the heartbeat connection and its thread
  std::unique_ptr<Heartbeat> heartbeat_;
};

}  // namespace tessera::comm
