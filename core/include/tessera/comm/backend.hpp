// The communication seam: one Backend interface that every comm backend (local, ucx, nccl)
// implements, and the BufferView / P2POp / Work types it speaks in.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/comm/store.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/dtype.hpp"

namespace tessera::comm {

/// Reduction applied by all_reduce and reduce_scatter.
enum class ReduceOp : std::uint8_t { Sum, Avg, Max, Min };
std::string_view reduce_op_name(ReduceOp op) noexcept;

/// Where a buffer lives (core's enum: a tensor's space is a buffer's space).
using core::MemorySpace;

/// A view of `count` contiguous elements. Never owns memory; the memory must stay valid until the
/// Work of the operation that uses it has completed.
struct BufferView {
  void* data = nullptr;
  std::size_t count = 0;  ///< elements, not bytes
  core::DType dtype = core::DType::F32;
  MemorySpace space = MemorySpace::Host;
  /// The device memory a Cuda buffer is in, when the caller knows it (core's tensors do): a
  /// backend that moves host memory only stages the buffer through it. May be null.
  core::DeviceMemory* device = nullptr;

  std::size_t bytes() const noexcept { return count * core::dtype_size(dtype); }
};

/// One send or receive of a batch (see Backend::batch_p2p).
struct P2POp {
  enum class Kind : std::uint8_t { Send, Recv };
  Kind kind = Kind::Send;
  BufferView buf;
  int peer = -1;  ///< rank in this group
  int tag = 0;    ///< sends and receives between one pair match in order per tag
};

/// What an implementation really does (must match its overrides).
struct Capabilities {
  bool cuda_memory = false;  ///< accepts MemorySpace::Cuda buffers
  bool all_to_all = true;
  bool split = true;
  bool multi_process = false;  ///< ranks may live in different processes or hosts
  /// With cuda_memory: CUDA buffers are copied through pinned host memory (a host-only transport
  /// such as Debian's UCX), not sent by the device itself; correct, slower than a native path.
  bool cuda_staged = false;
  /// A posted operation's data moves while the caller computes, between the post and the wait,
  /// without the caller inside a call of this backend (nccl: on its CUDA stream). False: the data
  /// moves only inside the backend's calls (local, ucx: a collective runs whole inside its post;
  /// a batch's sends leave in the post and its receives land in is_completed() or wait()).
  /// TracingComm draws the operation's span from it; the simulator can model both kinds
  /// (sim::CommProgress, --comm-progress).
  bool overlaps_compute = false;
};

/// When an operation's data moved, as its backend observed it (steady clock): from the start of
/// the transfer to its completion.
struct Moved {
  std::chrono::steady_clock::time_point start, end;
};

/// Completion handle of an operation (c10d style). Destroying a Work before its operation
/// completed abandons the operation: its buffers may go with it, so the backend stops using them
/// and may fail the group (local and ucx do: the group's later and pending operations throw
/// BackendError naming the rank that abandoned it). Wait before letting a Work go.
class Work {
 public:
  virtual ~Work() = default;
  /// Non-blocking: true once the operation finished (successfully or not).
  virtual bool is_completed() = 0;
  /// Blocks until completion or the backend's deadline. Throws BackendError (TimeoutError on a
  /// deadline) naming the operation, this rank and the peer. Calling it again after success is a
  /// no-op.
  virtual void wait() = 0;
  /// Once completed successfully: when the data moved, where the backend knows it (the local
  /// backend's collectives: while the last rank to post moved every rank's data); else nullopt,
  /// and a tracer takes the post and the first observed completion as the bounds.
  virtual std::optional<Moved> moved() const { return std::nullopt; }
};
using WorkPtr = std::unique_ptr<Work>;

/// A Work that completed when it was created (for operations that finish before returning).
class CompletedWork final : public Work {
 public:
  bool is_completed() override { return true; }
  void wait() override {}
};

/// Collective and point-to-point communication among the ranks of one group.
///
/// Threading: a Backend object belongs to one rank and is used by one thread at a time.
/// Ordering: every rank of the group issues the same collectives in the same order; a mismatch is
/// reported as an error, never a hang. Every blocking wait has the deadline given at creation;
/// on expiry it throws TimeoutError naming the operation, the rank and the missing peer(s).
/// Failure: when any rank of the world fails, the others' pending and later operations throw
/// BackendError saying which rank failed and why.
/// Buffers: host memory unless capabilities().cuda_memory; in-place is allowed where noted.
class Backend {
 public:
  virtual ~Backend() = default;

  /// "local", "ucx", "nccl", ...
  virtual std::string_view name() const noexcept = 0;
  /// This rank's index in the group, 0 ≤ rank < size.
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual Capabilities capabilities() const noexcept = 0;
  /// Deadline applied to every blocking wait of this backend.
  virtual std::chrono::milliseconds timeout() const noexcept = 0;

  /// Reduces `buf` across the group in place; every rank gets the result.
  virtual WorkPtr all_reduce(BufferView buf, ReduceOp op) = 0;
  /// recv.count == size() * send.count; block r of recv comes from rank r.
  virtual WorkPtr all_gather(BufferView send, BufferView recv) = 0;
  /// send.count == size() * recv.count; rank r gets the reduction of block r.
  virtual WorkPtr reduce_scatter(BufferView send, BufferView recv, ReduceOp op) = 0;
  /// Copies `root`'s buffer into every other rank's.
  virtual WorkPtr broadcast(BufferView buf, int root) = 0;
  /// Posts all sends and receives as one group so that paired exchanges between neighbours cannot
  /// deadlock. A receive's count must equal the matching send's. Sending to oneself is allowed
  /// when the matching receive is in the same batch.
  virtual WorkPtr batch_p2p(const std::vector<P2POp>& ops) = 0;
  /// Returns once every rank of the group has called barrier (or throws at the deadline).
  virtual void barrier() = 0;

  /// send.count == recv.count == size() * block; block r of send goes to rank r and arrives as
  /// block (this rank) of r's recv. Optional: the default throws Unsupported.
  virtual WorkPtr all_to_all(BufferView send, BufferView recv);
  /// Collective over this group: every rank calls it, in the same order, with the ranks (of this
  /// group) of the sub-group it belongs to; ranks within a sub-group are ordered as listed.
  /// Returns this rank's sub-group backend, or nullptr when `ranks` does not contain this rank.
  /// Optional: the default throws Unsupported.
  virtual std::unique_ptr<Backend> split(const std::vector<int>& ranks);
};

/// How ranks of a job find each other; each backend uses its own kind (the local backend an
/// in-process world, network backends a key-value store).
class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  /// "local", "env://host:port", ...
  virtual std::string describe() const = 0;
  /// The job's key-value store, or nullptr for in-process rendezvous (local). Owned by the
  /// Rendezvous; valid while it lives.
  virtual Store* store() { return nullptr; }
};

/// What a backend factory needs.
struct BackendOptions {
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  std::shared_ptr<Rendezvous> rendezvous;
};

}  // namespace tessera::comm
