// UcxBackend::batch_p2p: one P2PWork per batch of tagged sends and receives, posted as one group
// (so neighbours exchanging both ways cannot deadlock), with the deadline and the error messages
// of every wait.
#include <algorithm>
#include <array>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tessera/comm/recycled.hpp"
#include "tessera/core/error.hpp"
#include "ucx_backend.hpp"

namespace tessera::comm::ucx {

namespace {

/// "rank 1" or "rank 1 (world rank 3)", formatted only when a message needs it.
std::string where_text(int rank, int world_rank, bool is_world) {
  if (is_world) return detail::cat("rank ", rank);
  return detail::cat("rank ", rank, " (world rank ", world_rank, ")");
}

/// One batch_p2p: its ops, built by batch_p2p and posted once.
class P2PWork final : public Work, public Recycled<P2PWork> {
 public:
  P2PWork(std::shared_ptr<Context> ctx, int rank, int world_rank, bool is_world,
          std::chrono::milliseconds timeout, std::size_t n)
      : ctx_(std::move(ctx)),
        rank_(rank),
        world_rank_(world_rank),
        is_world_(is_world),
        timeout_(timeout),
        n_(n) {
    if (n_ > kInline) {
      heap_ops_.resize(n_);
      heap_ptrs_.resize(n_);
      ops_ = heap_ops_.data();
    } else {
      ops_ = reinterpret_cast<Op*>(inline_ops_);
      for (std::size_t i = 0; i < n_; ++i) new (&ops_[i]) Op;  // only the ops in use
    }
    ptrs_ = {n_ > kInline ? heap_ptrs_.data() : inline_ptrs_.data(), n_};
  }
  ~P2PWork() override {
    if (!done_) ctx_->cancel(ptrs_);
    unhold();
    if (n_ <= kInline)
      for (std::size_t i = 0; i < n_; ++i) ops_[i].~Op();
  }
  P2PWork(const P2PWork&) = delete;
  P2PWork& operator=(const P2PWork&) = delete;
  Op& op(std::size_t i) { return ops_[i]; }
  /// Orders the filled ops for posting: receives, then sends.
  void order() {
    std::size_t k = 0;
    for (std::size_t i = 0; i < n_; ++i)
      if (!ops_[i].is_send) ptrs_[k++] = &ops_[i];
    for (std::size_t i = 0; i < n_; ++i)
      if (ops_[i].is_send) ptrs_[k++] = &ops_[i];
  }
  /// A message above the eager limit: the batch moves only while both sides progress.
  void set_rendezvous(bool r) { rendezvous_ = r; }
  /// Posts the ordered ops (once).
  void post() {
    done_ = false;
    ctx_->post(ptrs_);
    if (rendezvous_ && progress_mode() == Progress::Thread && !ctx_->test(ptrs_)) {
      ctx_->hold_progress();  // moves while the caller computes
      holding_ = true;
    }
  }
  bool is_completed() override {
    if (done_) return true;
    if (!ctx_->test(ptrs_)) return false;
    finish();
    return true;
  }
  void wait() override {
    if (done_) return;
    const std::string why = ctx_->wait_for(ptrs_, timeout_);
    if (why.empty()) return finish();
    std::string waiting;
    for (const Op* op : ptrs_)
      if (op->state != Op::State::Done) waiting += (waiting.empty() ? "" : ", ") + op->describe();
    ctx_->cancel(ptrs_);
    done_ = true;
    unhold();
    const std::string where = where_text(rank_, world_rank_, is_world_);
    if (why.rfind("timeout", 0) == 0)
      throw TimeoutError("ucx", detail::cat(where, ": batch_p2p timed out after ", timeout_.count(),
                                            " ms waiting for ", waiting, why.substr(7)));
    if (why.rfind("abort:", 0) == 0)
      throw BackendError("ucx", 125, detail::cat(where, ": batch_p2p aborted: ", why.substr(6)));
    const std::string msg = detail::cat(where, ": batch_p2p: ", why.substr(why.find(':') + 1));
    ctx_->store().abort(msg);
    throw BackendError("ucx", 5, msg);
  }

 private:
  void unhold() noexcept {
    if (holding_) ctx_->release_progress();
    holding_ = false;
  }

  void finish() {
    done_ = true;
    unhold();
    for (std::size_t i = 0; i < n_; ++i) {
      const Op& op = ops_[i];
      if (op.state != Op::State::Failed) continue;
      const std::string where = where_text(rank_, world_rank_, is_world_);
      if (op.size_mismatch) {
        const std::size_t e = op.elem_bytes;
        throw InvalidArgument(detail::cat(
            "ucx: ", where, ": batch_p2p ", op.describe(), ": the message has ", op.got_bytes / e,
            " elements (", op.got_bytes, " bytes) but the receive expects ", op.expect_bytes / e,
            " (", op.expect_bytes, " bytes); the sender's and receiver's counts must match"));
      }
      throw BackendError("ucx", 5, detail::cat(where, ": batch_p2p ", op.error));
    }
  }

  std::shared_ptr<Context> ctx_;
  int rank_, world_rank_;
  bool is_world_;
  std::chrono::milliseconds timeout_;
  // The operations (stable addresses), inline for the usual halo batch of up to 4.
  static constexpr std::size_t kInline = 4;
  std::size_t n_;
  alignas(Op) unsigned char inline_ops_[kInline * sizeof(Op)];  // constructed up to n_
  std::array<Op*, kInline> inline_ptrs_;
  std::vector<Op> heap_ops_;
  std::vector<Op*> heap_ptrs_;
  Op* ops_ = nullptr;
  std::span<Op*> ptrs_;  // receives first, then sends
  bool done_ = true;     // nothing in flight (before the post, or completed)
  bool rendezvous_ = false;
  bool holding_ = false;  // holds the context's progress helper while in flight
};

}  // namespace

WorkPtr UcxBackend::batch_p2p(const std::vector<P2POp>& ops) {
  for (const auto& o : ops) {
    TESSERA_CHECK(o.peer >= 0 && o.peer < size(), "ucx: ", where(), ": batch_p2p to/from rank ",
                  o.peer, " outside this group of ", size(), " ranks");
    TESSERA_CHECK(o.tag >= 0, "ucx: ", where(), ": batch_p2p tag ", o.tag, " is negative");
    if (o.buf.space != MemorySpace::Host) check_host(o.buf, "batch_p2p");
  }
  auto work =
      std::make_unique<P2PWork>(ctx_, rank_, ctx_->rank(), comm_id_ == 1, timeout_, ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const P2POp& o = ops[i];
    Op& op = work->op(i);
    const int peer_world = members_[static_cast<std::size_t>(o.peer)];
    op.peer = peer_world;
    op.is_send = o.kind == P2POp::Kind::Send;
    op.what_peer = o.peer;
    op.what_tag = o.tag;
    op.elem_bytes = static_cast<std::uint8_t>(core::dtype_size(o.buf.dtype));
    if (op.is_send) {
      op.tag = tag(false, static_cast<std::uint32_t>(o.tag), ctx_->rank());
      op.send_data = o.buf.data;
      op.send_bytes = o.buf.bytes();
    } else {
      op.tag = tag(false, static_cast<std::uint32_t>(o.tag), peer_world);
      op.dst = o.buf.data;
      op.expect_bytes = o.buf.bytes();
    }
  }
  work->order();
  work->set_rendezvous(std::any_of(ops.begin(), ops.end(),
                                   [](const P2POp& o) { return o.buf.bytes() > kEagerBytes; }));
  work->post();
  return work;
}

}  // namespace tessera::comm::ucx
