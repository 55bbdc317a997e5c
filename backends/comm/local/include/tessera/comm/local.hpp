// The `local` comm backend: N ranks as threads of one process (the zero-setup default).
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "tessera/comm/backend.hpp"

namespace tessera::comm::local {

/// Shared state of one in-process job: per-group rendezvous slots for collectives, per-rank
/// mailboxes for point-to-point, and the abort flag that releases every waiting rank when one
/// rank fails. Several Worlds may exist in one process (no global state).
class World : public Rendezvous {
 public:
  /// A world of `size` ≥ 1 ranks whose backends wait at most `timeout` (> 0) in any blocking
  /// call. Throws InvalidArgument otherwise.
  explicit World(int size, std::chrono::milliseconds timeout = std::chrono::minutes(5));
  /// Backends taken from the world keep its state alive; destroying the World first is fine.
  ~World() override;
  /// Number of ranks.
  int size() const noexcept;
  /// Default deadline of the backends from backend(rank).
  std::chrono::milliseconds timeout() const noexcept;
  /// "local world of 4 ranks (timeout 60000 ms)".
  std::string describe() const override;

  /// The world-group backend of `rank` (0 ≤ rank < size). Each rank calls it once, from its thread;
  /// a second call for the same rank throws InvalidArgument.
  std::unique_ptr<Backend> backend(int rank);
  /// As backend(rank), with its own deadline for every blocking wait instead of the world's.
  std::unique_ptr<Backend> backend(int rank, std::chrono::milliseconds timeout);

  /// Marks the world failed: every pending and later wait of every rank throws BackendError
  /// quoting `reason` (e.g. "rank 2 failed: ..."). The first reason wins. Never throws.
  void abort(const std::string& reason) noexcept;
  /// True once abort() was called.
  bool aborted() const noexcept;

  /// Groups, rendezvous slots, mailboxes, abort flag (defined in the backend's sources).
  struct State;

 private:
  std::shared_ptr<State> state_;
};

/// Factory for the registry: `options.rendezvous` must hold a local::World of `options.size` ranks.
std::unique_ptr<Backend> create(const BackendOptions& options);
/// What the local backend does: host memory, all_to_all, split; one process only.
Capabilities capabilities() noexcept;

/// Runs `fn` on `size` threads, rank r's thread with rank r's world backend. When a rank throws,
/// the world is aborted so the other ranks' waits throw instead of hanging; after joining every
/// thread, the first (root-cause) exception is rethrown. `fn` must not retain the backend.
void run(int size, const std::function<void(Backend&)>& fn,
         std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace tessera::comm::local
