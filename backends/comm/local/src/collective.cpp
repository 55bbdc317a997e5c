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

void run_collective(World::State& world, Group& g, int rank, std::uint64_t seq,
                    const CollectiveCall& call, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string_view op = kind_name(call.kind);
  std::unique_lock lock(g.mu);
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

  if (++slot.arrived == g.size()) {
    // Last to arrive: every other rank is blocked below, so reading and writing their buffers is
    // safe. The work runs under the group's mutex, which keeps a waiter from timing out (and
    // leaving with its buffers) halfway through.
    if (call.kind == CollectiveKind::Split) {
      std::string problem = check_split(g, slot.calls);
      if (!problem.empty()) {
        fail_group(g, FailureKind::InvalidSplit, problem);
        lock.unlock();
        g.coll_cv.notify_all();
        throw InvalidArgument("local backend: " + problem);
      }
    }
    try {
      perform_collective(slot.calls);
    } catch (const std::exception& e) {  // out of memory or a broken invariant: release everyone
      fail_group(g, FailureKind::Mismatch,
                 detail::cat(describe(call), " (call #", seq, ") failed on ", g.who(rank), ": ",
                             e.what()));
      lock.unlock();
      g.coll_cv.notify_all();
      throw;
    }
    slot.done = true;
    leave(g, seq, slot);
    lock.unlock();
    g.coll_cv.notify_all();
    return;
  }

  g.coll_cv.wait_until(lock, deadline, [&] {
    return slot.done || g.failure != FailureKind::None || world.aborted.load();
  });
  if (slot.done) {
    leave(g, seq, slot);
    return;
  }
  // Leaving without the result. Abort is final and a failed group stays failed, and a timeout
  // marks the group failed below, so no late arrival can perform this slot with our buffers gone.
  if (world.aborted.load()) throw world.aborted_error(g.who(rank), op);  // aborts are final
  if (g.failure != FailureKind::None)
    throw_failure(g.failure, detail::cat(g.who(rank), ": ", op, " (call #", seq, ") on ", g.label(),
                                         " failed: ", g.failure_reason));
  std::string reason =
      detail::cat(g.who(rank), " timed out after ", timeout.count(), " ms in ", describe(call),
                  " (call #", seq, ") on ", g.label(), "; not arrived: ", missing_ranks(g, slot),
                  " (a rank skipped this collective, called another one, or is stuck)");
  fail_group(g, FailureKind::Timeout, reason);
  lock.unlock();
  g.coll_cv.notify_all();
  throw TimeoutError("local", reason);
}

}  // namespace tessera::comm::local
