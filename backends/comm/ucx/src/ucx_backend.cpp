// UcxBackend basics: tags, the exchange round every collective uses, batch_p2p, split, create,
// and the plugin's exported entry point.
#include "ucx_backend.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <new>
#include <set>
#include <span>
#include <utility>

#include "tessera/comm/plugin_export.hpp"
#include "tessera/comm/recycled.hpp"
#if TESSERA_UCX_CUDA_STAGING
#include "tessera/comm/cuda_staging.hpp"
#endif
#include "tessera/core/error.hpp"

namespace tessera::comm::ucx {

const char* coll_name(CollOp op) {
  switch (op) {
    case CollOp::AllReduce:
      return "all_reduce";
    case CollOp::AllGather:
      return "all_gather";
    case CollOp::ReduceScatter:
      return "reduce_scatter";
    case CollOp::Broadcast:
      return "broadcast";
    case CollOp::AllToAll:
      return "all_to_all";
    case CollOp::Barrier:
      return "barrier";
    case CollOp::Split:
      return "split";
  }
  return "?";
}

namespace {
std::string describe(const Header& h) {
  std::string s = detail::cat(coll_name(static_cast<CollOp>(h.op)), " #", h.seq, " (");
  if (h.op == static_cast<std::uint8_t>(CollOp::Barrier) ||
      h.op == static_cast<std::uint8_t>(CollOp::Split))
    return s.substr(0, s.size() - 2);
  s += core::dtype_name(static_cast<core::DType>(h.dtype));
  if (h.op == static_cast<std::uint8_t>(CollOp::AllReduce) ||
      h.op == static_cast<std::uint8_t>(CollOp::ReduceScatter))
    s += detail::cat(" ", reduce_op_name(static_cast<ReduceOp>(h.rop)));
  s += detail::cat(" count ", h.count);
  if (h.root >= 0) s += detail::cat(" root ", h.root);
  return s + ")";
}
}  // namespace

UcxBackend::UcxBackend(std::shared_ptr<Context> ctx, std::vector<int> members, int comm_id,
                       std::chrono::milliseconds timeout)
    : ctx_(std::move(ctx)), members_(std::move(members)), comm_id_(comm_id), timeout_(timeout) {
  rank_ = static_cast<int>(std::find(members_.begin(), members_.end(), ctx_->rank()) -
                           members_.begin());
}

Capabilities capabilities() {
  return {/*cuda_memory=*/false, /*all_to_all=*/true, /*split=*/true, /*multi_process=*/true};
}
Capabilities UcxBackend::capabilities() const noexcept { return ucx::capabilities(); }

std::string UcxBackend::where() const {
  if (comm_id_ == 1) return detail::cat("rank ", rank_);
  return detail::cat("rank ", rank_, " (world rank ", ctx_->rank(), ")");
}

std::uint64_t UcxBackend::tag(bool collective, std::uint32_t x, int src_world) const {
  return (static_cast<std::uint64_t>(comm_id_ & 0x7fff) << 49) |
         (static_cast<std::uint64_t>(collective) << 48) | (static_cast<std::uint64_t>(x) << 16) |
         static_cast<std::uint64_t>(src_world & 0xffff);
}

void UcxBackend::check_host(const BufferView& b, const char* op) const {
  if (b.space != MemorySpace::Host)
    throw Unsupported(detail::cat(
        "ucx: ", where(), ": ", op,
        ": only host memory reaches the transport (Debian's UCX has no CUDA; CUDA buffers are "
        "staged by "
        "the plugin where it was built with the CUDA toolkit); use nccl for device buffers"));
}

void UcxBackend::check_reducible(core::DType t, const char* op) const {
  if (t == core::DType::BF16 || t == core::DType::F16)
    throw Unsupported(detail::cat("ucx: ", where(), ": ", op, " of ", core::dtype_name(t),
                                  " is not supported; reduce in f32"));
}

Header UcxBackend::header(CollOp op, core::DType dtype, ReduceOp rop, std::size_t count, int root) {
  if (!failed_.empty())
    throw BackendError(
        "ucx", 125,
        detail::cat(where(), ": ", coll_name(op), ": this group failed earlier (", failed_, ")"));
  Header h;
  h.op = static_cast<std::uint8_t>(op);
  h.dtype = static_cast<std::uint8_t>(dtype);
  h.rop = static_cast<std::uint8_t>(rop);
  h.count = count;
  h.root = root;
  h.seq = seq_;
  seq_ = (seq_ + 1) & ~kPayloadBit;
  h.src = rank_;
  return h;
}

void UcxBackend::fail_wait(const std::string& why, const std::string& what,
                           const std::vector<Op*>& ops,
                           const std::vector<std::string>& waiting_for) {
  ctx_->cancel(ops);
  std::string list;
  for (const auto& w : waiting_for) list += (list.empty() ? "" : ", ") + w;
  if (why.rfind("timeout", 0) == 0)
    throw TimeoutError(
        "ucx",
        detail::cat(where(), ": ", what, " timed out after ", timeout_.count(), " ms waiting for ",
                    list.empty() ? "its sends to complete" : list, why.substr(7)));
  if (why.rfind("abort:", 0) == 0) {
    const std::string reason = why.substr(6);
    if (reason.rfind("internal:", 0) == 0)
      throw InternalError(
          detail::cat("ucx: ", where(), ": ", what, " aborted: ", reason.substr(9)));
    throw BackendError("ucx", 125, detail::cat(where(), ": ", what, " aborted: ", reason));
  }
  const std::string msg =
      detail::cat(where(), ": ", what, ": ", why.rfind("peer:", 0) == 0 ? why.substr(5) : why);
  ctx_->store().abort(msg);
  throw BackendError("ucx", 5, msg);
}

namespace {
/// The largest message of a round: a header and a packed payload.
constexpr std::size_t kMessageCap = sizeof(Header) + kPackBytes;
}  // namespace

char* UcxBackend::rx_buffer(std::size_t i) {
  while (rx_.size() <= i) rx_.push_back(std::make_unique_for_overwrite<char[]>(kMessageCap));
  return rx_[i].get();
}
char* UcxBackend::tx_buffer(std::size_t i) {
  while (tx_.size() <= i) tx_.push_back(std::make_unique_for_overwrite<char[]>(kMessageCap));
  return tx_[i].get();
}

void UcxBackend::exchange(const Header& h, const std::vector<Send>& sends,
                          std::vector<Recv>& recvs) {
  std::vector<Header> hdrs(sends.size(), h);
  // Stable addresses: at most two messages per peer and direction.
  std::vector<Op> ops(2 * (sends.size() + recvs.size()));
  std::size_t used = 0;
  std::vector<Op*> first, payloads;  // headers and sends; then the large payloads' receives
  std::vector<Op*> head(recvs.size(), nullptr), body(recvs.size(), nullptr);
  for (std::size_t i = 0; i < recvs.size(); ++i) {
    Recv& rv = recvs[i];
    const int peer = members_[static_cast<std::size_t>(rv.peer)];
    if (!rv.dst) rv.data.resize(rv.bytes);
    // Posted at once into a kept buffer that holds any message of a round, so a peer in another
    // collective is received whole and named (and nothing waits in UCX's unexpected queue).
    Op& hop = ops[used++];
    hop.peer = peer;
    hop.tag = tag(true, h.seq, peer);
    hop.dst = rx_buffer(i);
    hop.expect_bytes = kMessageCap;
    hop.up_to = true;
    hop.what_peer = rv.peer;
    first.push_back(head[i] = &hop);
    if (rv.bytes > kPackBytes) {
      Op& pop = ops[used++];
      pop.peer = peer;
      pop.tag = tag(true, h.seq | kPayloadBit, peer);
      pop.dst = rv.dst ? rv.dst : rv.data.data();
      pop.expect_bytes = rv.bytes;
      pop.what_peer = rv.peer;
      payloads.push_back(body[i] = &pop);
    }
  }
  for (std::size_t i = 0; i < sends.size(); ++i) {
    const Send& sd = sends[i];
    const int peer = members_[static_cast<std::size_t>(sd.peer)];
    hdrs[i].step = sd.step;
    Op& hop = ops[used++];
    hop.is_send = true;
    hop.peer = peer;
    hop.tag = tag(true, h.seq, ctx_->rank());
    hop.what_peer = sd.peer;
    if (sd.bytes > kPackBytes) {
      hop.send_data = &hdrs[i];
      hop.send_bytes = sizeof(Header);
      Op& pop = ops[used++];
      pop.is_send = true;
      pop.peer = peer;
      pop.tag = tag(true, h.seq | kPayloadBit, ctx_->rank());
      pop.send_data = sd.data;
      pop.send_bytes = sd.bytes;
      pop.what_peer = sd.peer;
      first.push_back(&hop);
      first.push_back(&pop);
    } else {
      char* packed = tx_buffer(i);
      std::memcpy(packed, &hdrs[i], sizeof(Header));
      if (sd.bytes) std::memcpy(packed + sizeof(Header), sd.data, sd.bytes);
      hop.send_data = packed;
      hop.send_bytes = sizeof(Header) + sd.bytes;
      first.push_back(&hop);
    }
  }
  std::vector<Op*> all = first;
  all.insert(all.end(), payloads.begin(), payloads.end());
  ctx_->post(all);
  auto wait_for = [&](const std::vector<Op*>& some) {
    const std::string why = ctx_->wait_for(some, timeout_);
    if (!why.empty()) {
      std::vector<std::string> waiting;
      for (Op* op : some)
        if (!op->is_send && op->state != Op::State::Done) waiting.push_back(op->describe());
      failed_ = detail::cat(describe(h), " did not complete");
      fail_wait(why, describe(h), all, waiting);
    }
    for (Op* op : some)
      if (op->state == Op::State::Failed) {
        failed_ = op->error;
        fail_wait("peer:" + op->error, describe(h), all, {});
      }
  };
  // Headers first: a peer in another collective is named before anybody waits for a payload
  // that will not come.
  wait_for(first);
  for (std::size_t i = 0; i < recvs.size(); ++i) {
    const std::span<const char> st(static_cast<const char*>(head[i]->dst), head[i]->got_bytes);
    Header in;
    if (st.size() < sizeof(Header)) {
      in.magic = 0;
    } else {
      std::memcpy(&in, st.data(), sizeof in);
    }
    const bool same = in.magic == h.magic && in.op == h.op && in.dtype == h.dtype &&
                      in.rop == h.rop && in.count == h.count && in.root == h.root &&
                      in.seq == h.seq;
    const std::size_t carried = st.size() - std::min(st.size(), sizeof(Header));
    const std::size_t expect_carried = recvs[i].bytes > kPackBytes ? 0 : recvs[i].bytes;
    if (!same || in.step != recvs[i].step || carried != expect_carried) {
      const std::string msg = detail::cat(
          where(), " called ", describe(h), " but rank ", recvs[i].peer, " called ",
          in.magic == h.magic ? describe(in)
                              : std::string("something else (not a tessera ucx message)"),
          same && in.step != recvs[i].step
              ? detail::cat(" at step ", in.step, " instead of ", recvs[i].step)
              : "",
          same && in.step == recvs[i].step
              ? detail::cat(" with ", carried, " bytes instead of ", expect_carried)
              : "",
          ": every rank of a group must issue the same collectives, with the same counts, dtypes, "
          "ops and roots, "
          "in the same order");
      failed_ = msg;
      ctx_->cancel(all);
      ctx_->store().abort("internal:" + msg);
      throw InternalError("ucx: " + msg);
    }
    if (carried)
      std::memcpy(recvs[i].dst ? recvs[i].dst : recvs[i].data.data(), st.data() + sizeof(Header),
                  carried);
  }
  if (payloads.empty()) return;
  wait_for(payloads);
  for (std::size_t i = 0; i < recvs.size(); ++i)
    if (body[i] && body[i]->size_mismatch) {
      const std::string msg =
          detail::cat(where(), ": ", describe(h), ": rank ", recvs[i].peer, " sent a payload of ",
                      body[i]->got_bytes, " bytes, expected ", recvs[i].bytes);
      failed_ = msg;
      ctx_->store().abort("internal:" + msg);
      throw InternalError("ucx: " + msg);
    }
}

// --- batch_p2p -------------------------------------------------------------------------------

namespace {

/// "rank 1" or "rank 1 (world rank 3)", formatted only when a message needs it.
std::string where_text(int rank, int world_rank, bool is_world) {
  if (is_world) return detail::cat("rank ", rank);
  return detail::cat("rank ", rank, " (world rank ", world_rank, ")");
}

/// One batch_p2p: started at once by batch_p2p, or kept by prepare_p2p and started again and
/// again (the ops are built once; a start rearms and posts them).
class P2PWork final : public P2PPlan, public Recycled<P2PWork> {
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
  void start() override {
    if (running_)
      throw InvalidArgument(detail::cat("ucx: ", where_text(rank_, world_rank_, is_world_),
                                        ": a prepared batch_p2p was started again before wait() "
                                        "ended its last start; every start needs its wait"));
    if (runs_++ > 0)
      for (Op* op : ptrs_) op->rearm();
    running_ = true;
    done_ = false;
    ctx_->post(ptrs_);
  }
  bool is_completed() override {
    if (done_) return true;
    if (!ctx_->test(ptrs_)) return false;
    finish();
    return true;
  }
  void wait() override {
    running_ = false;  // a wait ends the run, returning or throwing
    if (done_) return;
    const std::string why = ctx_->wait_for(ptrs_, timeout_);
    if (why.empty()) return finish();
    std::string waiting;
    for (const Op* op : ptrs_)
      if (op->state != Op::State::Done) waiting += (waiting.empty() ? "" : ", ") + op->describe();
    ctx_->cancel(ptrs_);
    done_ = true;
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
  void finish() {
    done_ = true;
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
  bool done_ = true;      // nothing in flight (before the first start, or completed)
  bool running_ = false;  // started and not yet waited for
  std::uint64_t runs_ = 0;
};

}  // namespace

P2PPlanPtr UcxBackend::make_p2p(const std::vector<P2POp>& ops) {
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
  return work;
}

WorkPtr UcxBackend::batch_p2p(const std::vector<P2POp>& ops) {
  P2PPlanPtr work = make_p2p(ops);
  work->start();
  return work;
}

P2PPlanPtr UcxBackend::prepare_p2p(const std::vector<P2POp>& ops) { return make_p2p(ops); }

// --- split ------------------------------------------------------------------------------------

std::unique_ptr<Backend> UcxBackend::split(const std::vector<int>& ranks) {
  std::set<int> seen;
  for (int r : ranks) {
    TESSERA_CHECK(r >= 0 && r < size(), "ucx: ", where(), ": split lists rank ", r,
                  " outside this group of ", size(), " ranks");
    TESSERA_CHECK(seen.insert(r).second, "ucx: ", where(), ": split lists rank ", r, " twice");
  }
  std::string list = "{";
  std::uint64_t hash = 1469598103934665603ull;
  for (int r : ranks) {
    list += detail::cat(list.size() > 1 ? ", " : "", r);
    hash = (hash ^ static_cast<std::uint64_t>(r + 1)) * 1099511628211ull;
  }
  list += "}";
  const bool member = seen.count(rank_) > 0;
  const std::uint64_t mine = member ? hash : 0;
  // Every rank tells every other its list's hash (one direct round).
  const Header h = header(CollOp::Split, core::DType::I64, ReduceOp::Sum, 0);
  std::vector<Send> sends;
  std::vector<Recv> recvs;
  for (int p = 0; p < size(); ++p)
    if (p != rank_) {
      sends.push_back({p, &mine, sizeof mine});
      recvs.push_back({p, sizeof mine});
    }
  exchange(h, sends, recvs);
  const std::uint32_t index = splits_++;
  if (!member) return nullptr;
  for (const auto& r : recvs) {
    if (!seen.count(r.peer)) continue;
    std::uint64_t theirs = 0;
    std::memcpy(&theirs, r.payload(), sizeof theirs);
    TESSERA_CHECK(theirs == hash, "ucx: ", where(), ": split lists disagree: this rank lists ",
                  list, " but rank ", r.peer,
                  " (a member) listed a different group; every member must pass the same list");
  }
  std::vector<int> world;
  for (int r : ranks) world.push_back(members_[static_cast<std::size_t>(r)]);
  std::uint64_t id =
      (static_cast<std::uint64_t>(comm_id_) * 0x9E3779B97F4A7C15ull) ^ (index + 0x51ull);
  id ^= id >> 29;
  id *= 0xBF58476D1CE4E5B9ull;
  id ^= id >> 32;
  const int comm = 2 + static_cast<int>(id % 32000);
  return std::make_unique<UcxBackend>(ctx_, std::move(world), comm, timeout_);
}

std::unique_ptr<Backend> create(const BackendOptions& options) {
  TESSERA_CHECK(
      options.rendezvous && options.rendezvous->store(),
      "comm backend 'ucx' needs a rendezvous with a key-value store (env://); run the ranks with "
      "tessera launch, torchrun-style variables, mpirun or srun");
  TESSERA_CHECK(options.size >= 1 && options.size <= 65535 && options.rank >= 0 &&
                    options.rank < options.size,
                "comm backend 'ucx': rank ", options.rank, " of ", options.size,
                " is out of range");
  auto ctx =
      std::make_shared<Context>(options.rendezvous, options.rank, options.size, options.timeout);
  std::vector<int> members(static_cast<std::size_t>(options.size));
  for (int r = 0; r < options.size; ++r) members[static_cast<std::size_t>(r)] = r;
  auto world = std::make_unique<UcxBackend>(std::move(ctx), std::move(members), 1, options.timeout);
#if TESSERA_UCX_CUDA_STAGING
  return stage_cuda_through_host(std::move(world));
#else
  return world;
#endif
}

}  // namespace tessera::comm::ucx

extern "C" __attribute__((visibility("default"))) const tessera_comm_plugin_v1_t*
tessera_comm_plugin_v1(void) {
#if TESSERA_UCX_CUDA_STAGING
  static const tessera_comm_plugin_v1_t table =
      tessera::comm::plugin::make_table<&tessera::comm::ucx::create>(
          "ucx",
          "UCX tagged messages (host memory; CUDA buffers staged through pinned host memory; shm, "
          "tcp, ...)",
          tessera::comm::staged_capabilities(tessera::comm::ucx::capabilities()));
#else
  static const tessera_comm_plugin_v1_t table =
      tessera::comm::plugin::make_table<&tessera::comm::ucx::create>(
          "ucx", "UCX tagged messages (host memory; shm, tcp, ...)",
          tessera::comm::ucx::capabilities());
#endif
  return &table;
}

// Prepared batches (Backend::prepare_p2p) across the ABI.
extern "C" __attribute__((visibility("default"))) const tessera_comm_plugin_v1_plans_t*
tessera_comm_plugin_v1_plans(void) {
  static const tessera_comm_plugin_v1_plans_t plans = tessera::comm::plugin::make_plans_table();
  return &plans;
}
