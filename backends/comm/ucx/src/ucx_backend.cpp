// UcxBackend basics: tags, the exchange round every collective uses, and split (batch_p2p is in
// p2p.cpp, create and the plugin's exported entry points in plugin.cpp).
#include "ucx_backend.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <set>
#include <span>
#include <utility>

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
  if (progress_mode() == Progress::Thread)
    thread_ = std::make_unique<CollectiveThread>([ctx = ctx_, who = where()] {
      ctx->abandon(detail::cat(who, ": a collective's Work was destroyed before it completed (that rank "
                                    "failed or returned without waiting)"));
    });
}

Capabilities capabilities() {
  Capabilities c{/*cuda_memory=*/false, /*all_to_all=*/true, /*split=*/true, /*multi_process=*/true};
  c.overlaps_compute = progress_mode() == Progress::Thread;
  return c;
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

// --- split ------------------------------------------------------------------------------------

std::unique_ptr<Backend> UcxBackend::split_now(const std::vector<int>& ranks) {
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

}  // namespace tessera::comm::ucx
