// Point-to-point for the local backend: sends copy eagerly into the receiver's mailbox (so a batch
// never deadlocks); receives are matched at post time and completed in Work::wait().
#include <algorithm>
#include <cstring>
#include <set>

#include "world_state.hpp"

namespace tessera::comm::local {
namespace {

/// A posted receive: the k-th receive on channel (peer, tag) takes the k-th message sent on it.
struct PendingRecv {
  BufferView buf;
  int peer = 0;
  int tag = 0;
  std::uint64_t index = 0;
  bool done = false;
};

/// The Work of one batch: completes its receives from the mailbox, until the deadline.
class BatchWork final : public Work {
 public:
  BatchWork(std::shared_ptr<World::State> world, std::shared_ptr<Group> group, int rank,
            std::vector<PendingRecv> recvs, std::chrono::milliseconds timeout)
      : world_(std::move(world)),
        group_(std::move(group)),
        rank_(rank),
        recvs_(std::move(recvs)),
        timeout_(timeout),
        posted_(std::chrono::steady_clock::now()),
        deadline_(posted_ + timeout),
        arrived_(posted_),
        remaining_(recvs_.size()),
        finished_(recvs_.empty()) {}

  bool is_completed() override {
    if (finished_) return true;
    std::vector<Ready> ready;
    {
      std::lock_guard lock(group_->mu);
      take_available(ready);
      if (!finished_ && world_->aborted.load()) fail(world_->aborted_error(who(), "batch_p2p"));
    }
    copy_out(ready);
    return finished_;
  }

  void wait() override {
    if (!finished_) {
      std::vector<Ready> ready;
      {
        std::unique_lock lock(group_->mu);
        auto& cv = group_->p2p_cv[static_cast<std::size_t>(rank_)];
        for (;;) {
          take_available(ready);
          if (finished_) break;
          if (world_->aborted.load()) {
            fail(world_->aborted_error(who(), "batch_p2p"));
            break;
          }
          if (cv.wait_until(lock, deadline_) == std::cv_status::timeout) {
            take_available(ready);
            if (!finished_) fail(TimeoutError("local", timeout_message()));
            break;
          }
        }
      }
      copy_out(ready);
    }
    if (error_) std::rethrow_exception(error_);
  }

  /// From the post until the last received message was in this rank's mailbox (the sends were
  /// copied at the post, each message at its sender's post); the copy into the receive buffers
  /// happens when completion is seen.
  std::optional<Moved> moved() const override {
    if (!finished_ || error_) return std::nullopt;
    return Moved{posted_, arrived_};
  }

 private:
  struct Ready {
    void* dst;
    Message msg;
  };

  std::string who() const { return group_->who(rank_); }

  template <class E>
  void fail(const E& e) {
    error_ = std::make_exception_ptr(e);
    finished_ = true;
  }

  /// Under the group's mutex: moves every message that has arrived for a pending receive out of
  /// the mailbox (the copy into the user's buffer happens after unlocking).
  void take_available(std::vector<Ready>& ready) {
    Mailbox& box = group_->mailboxes[static_cast<std::size_t>(rank_)];
    for (PendingRecv& r : recvs_) {
      if (r.done || finished_) continue;
      auto ch = box.channels.find({r.peer, r.tag});
      if (ch == box.channels.end()) continue;
      auto it = ch->second.pending.find(r.index);
      if (it == ch->second.pending.end()) continue;
      Message msg = std::move(it->second);
      ch->second.pending.erase(it);
      if (ch->second.pending.empty() && ch->second.sent == ch->second.posted)
        box.channels.erase(ch);  // nothing outstanding: counters restart at 0 on both sides
      if (msg.count != r.buf.count || msg.dtype != r.buf.dtype) {
        fail(InvalidArgument(
            detail::cat("local backend: batch_p2p size mismatch on ", group_->label(), ": ",
                        group_->who(r.peer), " sent ", msg.count, " ", core::dtype_name(msg.dtype),
                        " elements (", msg.bytes.size(), " bytes) with tag ", r.tag, " but ", who(),
                        " posted a receive of ", r.buf.count, " ", core::dtype_name(r.buf.dtype),
                        " elements (", r.buf.bytes(),
                        " bytes); post the receive with the count and dtype of "
                        "the matching send")));
        return;
      }
      r.done = true;
      arrived_ = std::max(arrived_, msg.sent);
      ready.push_back({r.buf.data, std::move(msg)});
      if (--remaining_ == 0) finished_ = true;
    }
  }

  static void copy_out(std::vector<Ready>& ready) {
    for (Ready& r : ready)
      if (!r.msg.bytes.empty()) std::memcpy(r.dst, r.msg.bytes.data(), r.msg.bytes.size());
    ready.clear();
  }

  std::string timeout_message() const {
    std::string awaited;
    for (const PendingRecv& r : recvs_) {
      if (r.done) continue;
      awaited += detail::cat(awaited.empty() ? "" : "; ", group_->who(r.peer), " tag ", r.tag, " (",
                             r.buf.count, " ", core::dtype_name(r.buf.dtype), " elements)");
    }
    return detail::cat(who(), ": batch_p2p on ", group_->label(), " timed out after ",
                       timeout_.count(), " ms waiting for a message from ", awaited,
                       "; the peer did not post the matching send (it failed, returned early, or "
                       "used another tag)");
  }

  std::shared_ptr<World::State> world_;
  std::shared_ptr<Group> group_;
  int rank_;
  std::vector<PendingRecv> recvs_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point posted_, deadline_;
  std::chrono::steady_clock::time_point arrived_;  ///< latest arrival of a received message
  std::size_t remaining_;
  bool finished_;
  std::exception_ptr error_;
};

}  // namespace

WorkPtr post_batch(std::shared_ptr<World::State> world, std::shared_ptr<Group> group, int rank,
                   const std::vector<P2POp>& ops, std::chrono::milliseconds timeout) {
  // Copy the sends before taking the lock.
  std::vector<Message> messages;
  for (const P2POp& op : ops) {
    if (op.kind != P2POp::Kind::Send) continue;
    Message m;
    m.sent = std::chrono::steady_clock::now();
    m.count = op.buf.count;
    m.dtype = op.buf.dtype;
    m.bytes.resize(op.buf.bytes());
    if (!m.bytes.empty()) std::memcpy(m.bytes.data(), op.buf.data, m.bytes.size());
    messages.push_back(std::move(m));
  }

  std::vector<PendingRecv> recvs;
  std::set<int> woken;
  {
    std::lock_guard lock(group->mu);
    if (world->aborted.load()) throw world->aborted_error(group->who(rank), "batch_p2p");
    std::size_t next_message = 0;
    for (const P2POp& op : ops) {
      if (op.kind == P2POp::Kind::Send) {
        Channel& ch = group->mailboxes[static_cast<std::size_t>(op.peer)].channels[{rank, op.tag}];
        ch.pending.emplace(ch.sent++, std::move(messages[next_message++]));
        woken.insert(op.peer);
      } else {
        Channel& ch = group->mailboxes[static_cast<std::size_t>(rank)].channels[{op.peer, op.tag}];
        recvs.push_back({op.buf, op.peer, op.tag, ch.posted++, false});
      }
    }
  }
  for (int peer : woken) group->p2p_cv[static_cast<std::size_t>(peer)].notify_all();
  return std::make_unique<BatchWork>(std::move(world), std::move(group), rank, std::move(recvs),
                                     timeout);
}

}  // namespace tessera::comm::local
