// Internal state of a local::World: groups, their collective rendezvous slots and p2p mailboxes,
// and the abort flag. Private to the local backend's sources.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/comm/local.hpp"
#include "tessera/core/error.hpp"

namespace tessera::comm::local {

/// When a collective's data moves, from TESSERA_LOCAL_PROGRESS (read once per process): Posted
/// (the default) — in the post of the last rank to arrive, the others return at once and go on
/// computing; Calls ("calls") — every rank waits in its post until the data moved (the backend
/// before it overlapped; kept to measure the difference, bench/README.md).
enum class Progress : std::uint8_t { Posted, Calls };
Progress progress_mode() noexcept;

/// BackendError code of an operation released by World::abort (ECANCELED).
inline constexpr int kAbortedCode = 125;

/// The collectives that go through a rendezvous slot.
enum class CollectiveKind : std::uint8_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  AllToAll,
  Barrier,
  Split
};
std::string_view kind_name(CollectiveKind kind) noexcept;

/// One rank's part of a collective: the description every rank must agree on, and its buffers.
/// `count` is the per-rank block in elements: buf.count (all_reduce, broadcast), send.count
/// (all_gather), recv.count (reduce_scatter), send.count / size (all_to_all).
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::Barrier;
  std::size_t count = 0;
  core::DType dtype = core::DType::F32;
  std::optional<ReduceOp> op;
  int root = -1;
  const void* send = nullptr;
  void* recv = nullptr;
  const std::vector<int>* split_ranks = nullptr;  ///< split only: this rank's sub-group
};
/// "all_reduce(count 7, f32, sum)".
std::string describe(const CollectiveCall& call);
/// True when two ranks' calls describe the same collective (kind, count, dtype, op, root).
bool same_call(const CollectiveCall& a, const CollectiveCall& b) noexcept;

/// Moves the data of a collective whose every rank has deposited its call (indexed by group
/// rank). Reductions run in rank order. Split and barrier move nothing.
void perform_collective(const std::vector<CollectiveCall>& calls);

/// The rendezvous of one collective call (one per group and sequence number).
struct Slot {
  std::vector<CollectiveCall> calls;  ///< by group rank
  std::vector<char> present;          ///< by group rank: has deposited its call
  int arrived = 0;
  int left = 0;
  int first = -1;  ///< group rank of the first arrival (the call others are compared with)
  bool done = false;
  bool moving = false;  ///< the last arrival is moving the data (outside the group's lock)
  std::chrono::steady_clock::time_point moved_from, moved_to;  ///< when the last arrival moved the data
};

/// Why a group became unusable (its ranks' sequence numbers no longer line up). Later calls on
/// the group throw TimeoutError, InternalError (Mismatch: disagreeing calls, or a failure while
/// moving the data), InvalidArgument (InvalidSplit) or BackendError (Abandoned: a rank destroyed
/// the Work of a collective before it completed, e.g. while unwinding from an exception).
enum class FailureKind : std::uint8_t { None, Timeout, Mismatch, InvalidSplit, Abandoned };

/// A sent message, copied eagerly at send time.
struct Message {
  std::chrono::steady_clock::time_point sent;  ///< when the send was posted (its copy taken)
  std::vector<std::byte> bytes;
  std::size_t count = 0;
  core::DType dtype = core::DType::F32;
};

/// Messages from one source with one tag to one destination. The k-th posted receive matches
/// the k-th sent message, whatever order the receives are waited in.
struct Channel {
  std::uint64_t sent = 0;
  std::uint64_t posted = 0;
  std::map<std::uint64_t, Message> pending;  ///< by send index, not yet received
};

/// The channels into one destination rank, by (source group rank, tag).
struct Mailbox {
  std::map<std::pair<int, int>, Channel> channels;
};

/// One communicator group: the world, or a sub-group made by split.
struct Group {
  Group(std::string key, std::vector<int> world_ranks);

  int size() const noexcept { return static_cast<int>(world_ranks.size()); }
  /// "rank 2" in the world group, "rank 1 (world rank 3)" in a sub-group.
  std::string who(int rank) const;
  /// "group world" or "group world/s3{2,3}".
  std::string label() const { return "group " + key; }

  const std::string key;               ///< parent key + "/s<split call #>{world ranks}"
  const std::vector<int> world_ranks;  ///< world rank of each group rank

  std::mutex mu;                                ///< guards everything below
  std::condition_variable coll_cv;              ///< collective waiters
  std::vector<std::condition_variable> p2p_cv;  ///< receivers, by group rank
  std::unordered_map<std::uint64_t, Slot> slots;
  FailureKind failure = FailureKind::None;
  std::string failure_reason;
  std::vector<Mailbox> mailboxes;  ///< by destination group rank
};

/// Shared state of one World. Lock order: groups_mu, then a Group's mu, then abort_mu.
struct World::State {
  State(int size, std::chrono::milliseconds timeout);

  /// The group with `key`, created on first use with `world_ranks` as members.
  std::shared_ptr<Group> group(const std::string& key, const std::vector<int>& world_ranks);
  /// See World::abort.
  void abort(const std::string& reason) noexcept;
  /// The error an operation released by abort throws: "<who>: <op> aborted: <reason>".
  BackendError aborted_error(const std::string& who, std::string_view op) const;

  const int size;
  const std::chrono::milliseconds timeout;
  std::atomic<bool> aborted{false};

  mutable std::mutex abort_mu;  ///< guards abort_reason
  std::string abort_reason;

  std::mutex groups_mu;  ///< guards groups and claimed
  std::map<std::string, std::shared_ptr<Group>> groups;
  std::vector<char> claimed;  ///< by world rank: World::backend was called
  std::shared_ptr<Group> world_group;
};

/// Posts one collective for group rank `rank`: deposits `call` into slot `seq`; the last arrival
/// moves every rank's data inside this call. The returned Work completes once that happened
/// (is_completed, or wait until `timeout` from now); until then the rank must leave its buffers
/// alone. Throws what run_collective throws at the post (abort, failed group, mismatch).
WorkPtr post_collective(std::shared_ptr<World::State> world, std::shared_ptr<Group> group, int rank,
                        std::uint64_t seq, const CollectiveCall& call,
                        std::chrono::milliseconds timeout);

/// Runs one collective for group rank `rank`: deposits `call` into slot `seq`, and either performs
/// the operation (last arrival) or waits for it until `timeout` from now. Throws TimeoutError,
/// BackendError (abort), InternalError (mismatched calls) or InvalidArgument (inconsistent split).
void run_collective(World::State& world, Group& group, int rank, std::uint64_t seq,
                    const CollectiveCall& call, std::chrono::milliseconds timeout);

/// Posts a batch of sends (copied now) and receives (completed by the returned Work's wait()).
/// `ops` must already be validated.
WorkPtr post_batch(std::shared_ptr<World::State> world, std::shared_ptr<Group> group, int rank,
                   const std::vector<P2POp>& ops, std::chrono::milliseconds timeout);

/// The backend of group rank `rank` in `group`.
std::unique_ptr<Backend> make_backend(std::shared_ptr<World::State> world,
                                      std::shared_ptr<Group> group, int rank,
                                      std::chrono::milliseconds timeout);

/// "3" or "2, 3" joined with ", " (world ranks or group ranks, as given).
std::string join_ints(const std::vector<int>& values);

}  // namespace tessera::comm::local
