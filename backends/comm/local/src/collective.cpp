// The collective rendezvous: one slot per (group, call number); the last rank to arrive checks
// that every rank made the same call, moves the data and releases the others.
#include <algorithm>
#include <sstream>

#include "world_state.hpp"

namespace tessera::comm::local {

std::string_view kind_name(CollectiveKind kind) noexcept {
  switch (kind) {
    case CollectiveKind::AllReduce:
      return "all_reduce";
    case CollectiveKind::AllGather:
      return "all_gather";
    case CollectiveKind::ReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::Broadcast:
      return "broadcast";
    case CollectiveKind::AllToAll:
      return "all_to_all";
    case CollectiveKind::Barrier:
      return "barrier";
    case CollectiveKind::Split:
      return "split";
  }
  return "?";
}

std::string describe(const CollectiveCall& call) {
  std::ostringstream os;
  os << kind_name(call.kind);
  if (call.kind == CollectiveKind::Barrier || call.kind == CollectiveKind::Split) return os.str();
  os << "(count " << call.count << ", " << core::dtype_name(call.dtype);
  if (call.op) os << ", " << reduce_op_name(*call.op);
  if (call.kind == CollectiveKind::Broadcast) os << ", root " << call.root;
  os << ")";
  return os.str();
}

bool same_call(const CollectiveCall& a, const CollectiveCall& b) noexcept {
  return a.kind == b.kind && a.count == b.count && a.dtype == b.dtype && a.op == b.op &&
         a.root == b.root;
}

namespace {

/// "" when every rank that lists itself lists the same sub-group as each member it lists.
std::string check_split(const Group& g, const std::vector<CollectiveCall>& calls) {
  for (int r = 0; r < g.size(); ++r) {
    const std::vector<int>& mine = *calls[static_cast<std::size_t>(r)].split_ranks;
    if (std::find(mine.begin(), mine.end(), r) == mine.end()) continue;
    for (int s : mine) {
      const std::vector<int>& theirs = *calls[static_cast<std::size_t>(s)].split_ranks;
      if (theirs != mine)
        return detail::cat("split on ", g.label(), ": ", g.who(r), " listed sub-group {",
                           join_ints(mine), "} but ", g.who(s), " listed {", join_ints(theirs),
                           "}; every member of a sub-group must pass the same ranks in the same "
                           "order");
    }
  }
  return {};
}

std::string missing_ranks(const Group& g, const Slot& slot) {
  std::vector<std::string> names;
  for (int r = 0; r < g.size(); ++r)
    if (!slot.present[static_cast<std::size_t>(r)]) names.push_back(g.who(r));
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

/// Marks the group unusable; every waiter of every slot wakes and throws.
void fail_group(Group& g, FailureKind kind, std::string reason) {
  if (g.failure != FailureKind::None) return;  // keep the first cause
  g.failure = kind;
  g.failure_reason = std::move(reason);
}

[[noreturn]] void throw_failure(FailureKind kind, const std::string& msg) {
  switch (kind) {
    case FailureKind::Timeout:
      throw TimeoutError("local", msg);
    case FailureKind::Mismatch:
      throw InternalError("local backend: " + msg);
    case FailureKind::InvalidSplit:
      throw InvalidArgument("local backend: " + msg);
    case FailureKind::Abandoned:
      throw BackendError("local", kAbortedCode, msg);
    case FailureKind::None:
      break;
  }
  throw InternalError("local backend: " + msg);
}

/// Counts this rank out of a finished slot; the last one out frees it.
void leave(Group& g, std::uint64_t seq, Slot& slot) {
  if (++slot.left == g.size()) g.slots.erase(seq);
}

}  // namespace

namespace {

/// Under the group's lock: deposits this rank's call into slot `seq`; the last arrival checks
/// the calls and moves the data. It moves it with the lock released (the others post and poll
/// their other collectives meanwhile); the slot is marked moving, and no waiter times out, fails
/// or leaves with its buffers while it is. Throws on abort, a failed group or a mismatch.
void deposit(World::State& world, Group& g, int rank, std::uint64_t seq, const CollectiveCall& call,
             std::unique_lock<std::mutex>& lock) {
  const std::string_view op = kind_name(call.kind);
  if (world.aborted.load()) throw world.aborted_error(g.who(rank), op);
  if (g.failure != FailureKind::None)
    throw_failure(g.failure,
                  detail::cat(g.who(rank), ": ", op, " (call #", seq, ") on ", g.label(),
                              " cannot run: the group failed earlier: ", g.failure_reason));

  Slot& slot = g.slots[seq];
  if (slot.calls.empty()) {
    slot.calls.resize(static_cast<std::size_t>(g.size()));
    slot.present.assign(static_cast<std::size_t>(g.size()), 0);
  }
  if (slot.first >= 0 && !same_call(slot.calls[static_cast<std::size_t>(slot.first)], call)) {
    std::string reason = detail::cat(
        "collective mismatch on ", g.label(), " at call #", seq, ": ", g.who(slot.first),
        " called ", describe(slot.calls[static_cast<std::size_t>(slot.first)]), " but ",
        g.who(rank), " called ", describe(call),
        "; every rank must issue the same collectives in the same order with the same counts, "
        "dtypes, ops and roots");
    fail_group(g, FailureKind::Mismatch, reason);
    lock.unlock();
    g.coll_cv.notify_all();
    throw InternalError("local backend: " + reason);
  }
  slot.calls[static_cast<std::size_t>(rank)] = call;
  slot.present[static_cast<std::size_t>(rank)] = 1;
  if (slot.first < 0) slot.first = rank;
  if (++slot.arrived < g.size()) return;

  // Last to arrive: the others have posted and do not touch their buffers before completion.
  if (call.kind == CollectiveKind::Split) {
    std::string problem = check_split(g, slot.calls);
    if (!problem.empty()) {
      fail_group(g, FailureKind::InvalidSplit, problem);
      lock.unlock();
      g.coll_cv.notify_all();
      throw InvalidArgument("local backend: " + problem);
    }
  }
  slot.moving = true;  // the reference stays valid: the slot is erased only once everyone left
  lock.unlock();
  slot.moved_from = std::chrono::steady_clock::now();
  std::exception_ptr failed;
  try {
    perform_collective(slot.calls);
  } catch (...) {  // out of memory or a broken invariant: release everyone
    failed = std::current_exception();
  }
  slot.moved_to = std::chrono::steady_clock::now();
  lock.lock();
  slot.moving = false;
  if (failed) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(failed);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    fail_group(g, FailureKind::Mismatch,
               detail::cat(describe(call), " (call #", seq, ") failed on ", g.who(rank), ": ", what));
    lock.unlock();
    g.coll_cv.notify_all();
    std::rethrow_exception(failed);
  }
  slot.done = true;
}

/// Under the group's lock: the last arrival is moving slot `seq`'s data right now.
bool moving(const Group& g, std::uint64_t seq) {
  auto it = g.slots.find(seq);
  return it != g.slots.end() && it->second.moving;
}

/// Under the group's lock, for a rank that deposited into slot `seq`: true once the slot is done
/// (the rank leaves it, `moved` gets its transfer times); false while it is open. Throws when the
/// world was aborted or the group failed.
bool settle(World::State& world, Group& g, int rank, std::uint64_t seq, std::string_view op,
            Moved* moved) {
  auto it = g.slots.find(seq);
  if (it == g.slots.end())
    throw InternalError(detail::cat("local backend: ", g.who(rank), ": ", op, " (call #", seq,
                                    ") lost its rendezvous slot"));
  Slot& slot = it->second;
  if (slot.done) {
    if (moved) *moved = {slot.moved_from, slot.moved_to};
    leave(g, seq, slot);
    return true;
  }
  if (slot.moving) return false;  // its buffers are being written: nobody leaves now
  // Leaving without the result. Abort is final and a failed group stays failed, and a timeout
  // marks the group failed, so no late arrival can perform this slot with our buffers gone.
  if (world.aborted.load()) throw world.aborted_error(g.who(rank), op);
  if (g.failure != FailureKind::None)
    throw_failure(g.failure, detail::cat(g.who(rank), ": ", op, " (call #", seq, ") on ", g.label(),
                                         " failed: ", g.failure_reason));
  return false;
}

/// The timeout of a rank that waited for slot `seq` in vain: marks the group failed (so no late
/// arrival performs it with this rank's buffers gone) and throws.
[[noreturn]] void time_out(Group& g, int rank, std::uint64_t seq, const std::string& what,
                           std::chrono::milliseconds timeout, std::unique_lock<std::mutex>& lock) {
  const Slot& slot = g.slots.at(seq);
  std::string reason =
      detail::cat(g.who(rank), " timed out after ", timeout.count(), " ms in ", what, " (call #",
                  seq, ") on ", g.label(), "; not arrived: ", missing_ranks(g, slot),
                  " (a rank skipped this collective, called another one, or is stuck)");
  fail_group(g, FailureKind::Timeout, reason);
  lock.unlock();
  g.coll_cv.notify_all();
  throw TimeoutError("local", reason);
}

/// The Work of a posted collective: complete once the last rank has arrived and moved the data.
class CollectiveWork final : public Work {
 public:
  CollectiveWork(std::shared_ptr<World::State> world, std::shared_ptr<Group> group, int rank,
                 std::uint64_t seq, const CollectiveCall& call, std::chrono::milliseconds timeout)
      : world_(std::move(world)),
        group_(std::move(group)),
        rank_(rank),
        seq_(seq),
        kind_(call.kind),
        what_(describe(call)),
        timeout_(timeout),
        deadline_(std::chrono::steady_clock::now() + timeout) {}

  ~CollectiveWork() override {
    // Destroyed before completion (an exception unwinding this rank): the last arrival must not
    // write into buffers that go with it. Wait while the data is being moved; otherwise fail the
    // group, so that no late arrival moves it and the others' waits end at once.
    if (finished_) return;
    std::unique_lock lock(group_->mu);
    try {
      while (moving(*group_, seq_)) group_->coll_cv.wait_for(lock, std::chrono::milliseconds(1));
      if (settle(*world_, *group_, rank_, seq_, kind_name(kind_), nullptr)) return;
    } catch (...) {  // the world was aborted or the group failed: nothing will move it
      return;
    }
    fail_group(*group_, FailureKind::Abandoned,
               detail::cat(group_->who(rank_), " abandoned ", what_, " (call #", seq_, ") on ",
                           group_->label(), ": its Work was destroyed before the collective "
                           "completed (that rank failed or returned without waiting)"));
    lock.unlock();
    group_->coll_cv.notify_all();
  }

  bool is_completed() override {
    if (finished_) return true;
    std::lock_guard lock(group_->mu);
    try {
      finished_ = settle(*world_, *group_, rank_, seq_, kind_name(kind_), &moved_);
    } catch (...) {
      error_ = std::current_exception();
      finished_ = true;
    }
    return finished_;
  }

  void wait() override {
    if (!finished_) {
      std::unique_lock lock(group_->mu);
      try {
        for (;;) {
          if (settle(*world_, *group_, rank_, seq_, kind_name(kind_), &moved_)) break;
          const bool timed_out =
              group_->coll_cv.wait_until(lock, deadline_) == std::cv_status::timeout;
          if (settle(*world_, *group_, rank_, seq_, kind_name(kind_), &moved_)) break;
          if (timed_out && moving(*group_, seq_))
            group_->coll_cv.wait_for(lock, std::chrono::milliseconds(1));  // being written
          else if (timed_out)
            time_out(*group_, rank_, seq_, what_, timeout_, lock);
        }
      } catch (...) {
        error_ = std::current_exception();
      }
      finished_ = true;
    }
    if (error_) std::rethrow_exception(error_);
  }

  std::optional<Moved> moved() const override {
    if (!finished_ || error_) return std::nullopt;
    return moved_;
  }

 private:
  std::shared_ptr<World::State> world_;
  std::shared_ptr<Group> group_;
  int rank_;
  std::uint64_t seq_;
  CollectiveKind kind_;
  std::string what_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point deadline_;
  bool finished_ = false;
  std::exception_ptr error_;
  Moved moved_;
};

}  // namespace

WorkPtr post_collective(std::shared_ptr<World::State> world, std::shared_ptr<Group> group, int rank,
                        std::uint64_t seq, const CollectiveCall& call,
                        std::chrono::milliseconds timeout) {
  {
    std::unique_lock lock(group->mu);
    deposit(*world, *group, rank, seq, call, lock);
  }
  group->coll_cv.notify_all();  // the last arrival releases the others
  return std::make_unique<CollectiveWork>(std::move(world), std::move(group), rank, seq, call,
                                          timeout);
}

void run_collective(World::State& world, Group& g, int rank, std::uint64_t seq,
                    const CollectiveCall& call, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string_view op = kind_name(call.kind);
  std::unique_lock lock(g.mu);
  deposit(world, g, rank, seq, call, lock);
  if (settle(world, g, rank, seq, op, nullptr)) {
    lock.unlock();
    g.coll_cv.notify_all();
    return;
  }
  for (;;) {
    const bool timed_out = g.coll_cv.wait_until(lock, deadline) == std::cv_status::timeout;
    if (settle(world, g, rank, seq, op, nullptr)) return;
    if (timed_out && moving(g, seq))
      g.coll_cv.wait_for(lock, std::chrono::milliseconds(1));  // being written
    else if (timed_out)
      time_out(g, rank, seq, describe(call), timeout, lock);
  }
}

}  // namespace tessera::comm::local
