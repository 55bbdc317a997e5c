// What `tessera launch` needs of the rendezvous: the job's store, served by the launcher of node 0,
// without naming the TCP store (backends/comm/common) in a front end.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace tessera::run {

/// The store a launched job's ranks rendezvous through (a TCP store server), served from this
/// process until destroyed.
class StoreServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";  ///< listen address
    int port = 0;                    ///< 0: any free port (see port())
    std::string token;               ///< the job's token: clients must present it
    /// Where the server's log lines go (connections dropped, ranks lost); empty: core::report.
    std::function<void(const std::string&)> log;
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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::run
