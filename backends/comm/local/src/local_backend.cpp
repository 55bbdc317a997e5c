// LocalBackend: one rank's view of a group of the local world. Validates every call, then hands
// collectives to the rendezvous and point-to-point to the mailboxes.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "world_state.hpp"

namespace tessera::comm::local {
namespace {

class LocalBackend final : public Backend {
 public:
  LocalBackend(std::shared_ptr<World::State> world, std::shared_ptr<Group> group, int rank,
               std::chrono::milliseconds timeout)
      : world_(std::move(world)), group_(std::move(group)), rank_(rank), timeout_(timeout) {}

  std::string_view name() const noexcept override { return "local"; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return group_->size(); }
  Capabilities capabilities() const noexcept override { return local::capabilities(); }
  std::chrono::milliseconds timeout() const noexcept override { return timeout_; }

  WorkPtr all_reduce(BufferView buf, ReduceOp op) override {
    check_buffer("all_reduce", "buf", buf);  // every dtype reduces (bf16/f16 in f32: reduce.cpp)
    return post(call(CollectiveKind::AllReduce, buf.count, buf.dtype, buf.data, buf.data, op));
  }

  WorkPtr all_gather(BufferView send, BufferView recv) override {
    check_pair("all_gather", send, recv);
    TESSERA_CHECK(recv.count == send.count * static_cast<std::size_t>(size()),
                  "local backend: all_gather on ", who(), ": recv.count (", recv.count,
                  ") must equal size() * send.count (", size(), " * ", send.count, " = ",
                  send.count * static_cast<std::size_t>(size()),
                  "); size the receive buffer to hold one block per rank");
    return post(call(CollectiveKind::AllGather, send.count, send.dtype, send.data, recv.data));
  }

  WorkPtr reduce_scatter(BufferView send, BufferView recv, ReduceOp op) override {
    check_pair("reduce_scatter", send, recv);
    TESSERA_CHECK(send.count == recv.count * static_cast<std::size_t>(size()),
                  "local backend: reduce_scatter on ", who(), ": send.count (", send.count,
                  ") must equal size() * recv.count (", size(), " * ", recv.count, " = ",
                  recv.count * static_cast<std::size_t>(size()),
                  "); the send buffer holds one block of recv.count elements per rank");
    return post(
        call(CollectiveKind::ReduceScatter, recv.count, recv.dtype, send.data, recv.data, op));
  }

  WorkPtr broadcast(BufferView buf, int root) override {
    check_buffer("broadcast", "buf", buf);
    TESSERA_CHECK(root >= 0 && root < size(), "local backend: broadcast on ", who(), ": root ",
                  root, " is outside the group of ", size(), " ranks; use 0 <= root < ", size());
    CollectiveCall c = call(CollectiveKind::Broadcast, buf.count, buf.dtype, buf.data, buf.data);
    c.root = root;
    return post(c);
  }

  WorkPtr all_to_all(BufferView send, BufferView recv) override {
    check_pair("all_to_all", send, recv);
    const auto n = static_cast<std::size_t>(size());
    TESSERA_CHECK(send.count == recv.count && send.count % n == 0, "local backend: all_to_all on ",
                  who(), ": send.count (", send.count, ") and recv.count (", recv.count,
                  ") must be equal and a multiple of size() (", n,
                  "); both hold one block per rank");
    TESSERA_CHECK(send.count == 0 || send.data != recv.data, "local backend: all_to_all on ", who(),
                  ": send and recv are the same buffer; in-place all_to_all is not "
                  "supported, use a separate receive buffer");
    return post(call(CollectiveKind::AllToAll, send.count / n, send.dtype, send.data, recv.data));
  }

  void barrier() override { collective(call(CollectiveKind::Barrier)); }

  WorkPtr batch_p2p(const std::vector<P2POp>& ops) override {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const P2POp& op = ops[i];
      const char* kind = op.kind == P2POp::Kind::Send ? "send" : "recv";
      TESSERA_CHECK(op.peer >= 0 && op.peer < size(), "local backend: batch_p2p on ", who(),
                    ": op ", i, " (", kind, ") has peer ", op.peer, ", outside the group of ",
                    size(), " ranks; peers are ranks of this group, 0 <= peer < ", size());
      check_buffer("batch_p2p", kind, op.buf);
    }
    return post_batch(world_, group_, rank_, ops, timeout_);
  }

  std::unique_ptr<Backend> split(const std::vector<int>& ranks) override {
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      TESSERA_CHECK(ranks[i] >= 0 && ranks[i] < size(), "local backend: split on ", who(),
                    ": rank ", ranks[i], " (entry ", i, ") is outside the group of ", size(),
                    " ranks; list ranks of the group being split");
      TESSERA_CHECK(std::count(ranks.begin(), ranks.end(), ranks[i]) == 1,
                    "local backend: split on ", who(), ": rank ", ranks[i], " is listed twice in {",
                    join_ints(ranks), "}");
    }
    const std::uint64_t seq = next_seq_;
    CollectiveCall c = call(CollectiveKind::Split);
    c.split_ranks = &ranks;
    collective(c);
    auto me = std::find(ranks.begin(), ranks.end(), rank_);
    if (me == ranks.end()) return nullptr;
    std::vector<int> world_ranks;
    for (int r : ranks) world_ranks.push_back(group_->world_ranks[static_cast<std::size_t>(r)]);
    // Every split call gets its own group: the key holds the parent, the call number and members.
    const std::string key = detail::cat(group_->key, "/s", seq, "{", join_ints(world_ranks), "}");
    return make_backend(world_, world_->group(key, world_ranks),
                        static_cast<int>(me - ranks.begin()), timeout_);
  }

 private:
  std::string who() const { return group_->who(rank_); }

  static CollectiveCall call(CollectiveKind kind, std::size_t count = 0,
                             core::DType dtype = core::DType::F32, const void* send = nullptr,
                             void* recv = nullptr, std::optional<ReduceOp> op = std::nullopt) {
    CollectiveCall c;
    c.kind = kind;
    c.count = count;
    c.dtype = dtype;
    c.send = send;
    c.recv = recv;
    c.op = op;
    return c;
  }

  /// A collective that moves data: posted, completed by the last rank to post it (or, with
  /// TESSERA_LOCAL_PROGRESS=calls, run whole here: every rank waits in its post).
  WorkPtr post(const CollectiveCall& call) {
    if (progress_mode() == Progress::Calls) {
      collective(call);
      return std::make_unique<CompletedWork>();
    }
    return post_collective(world_, group_, rank_, next_seq_++, call, timeout_);
  }

  /// Barrier and split: they block until every rank arrived.
  void collective(const CollectiveCall& call) {
    run_collective(*world_, *group_, rank_, next_seq_++, call, timeout_);
  }

  void check_buffer(const char* op, const char* what, const BufferView& b) const {
    // Device buffers reach this class only staged (World::backend wraps it): a device buffer
    // here means a caller bypassed that wrapper.
    if (b.space != MemorySpace::Host)
      throw InternalError(detail::cat("local backend: ", op, " on ", who(), ": ", what,
                                      " is device memory that was not staged through the host"));
    TESSERA_CHECK(b.count == 0 || b.data != nullptr, "local backend: ", op, " on ", who(), ": ",
                  what, " has count ", b.count, " but a null data pointer");
  }

  void check_pair(const char* op, const BufferView& send, const BufferView& recv) const {
    check_buffer(op, "send", send);
    check_buffer(op, "recv", recv);
    TESSERA_CHECK(send.dtype == recv.dtype, "local backend: ", op, " on ", who(), ": send is ",
                  core::dtype_name(send.dtype), " but recv is ", core::dtype_name(recv.dtype),
                  "; use one dtype for both");
  }

  std::shared_ptr<World::State> world_;
  std::shared_ptr<Group> group_;
  int rank_;
  std::chrono::milliseconds timeout_;
  std::uint64_t next_seq_ = 0;  ///< number of this rank's next collective on group_
};

}  // namespace

std::unique_ptr<Backend> make_backend(std::shared_ptr<World::State> world,
                                      std::shared_ptr<Group> group, int rank,
                                      std::chrono::milliseconds timeout) {
  return std::make_unique<LocalBackend>(std::move(world), std::move(group), rank, timeout);
}

Progress progress_mode() noexcept {
  static const Progress mode = [] {
    const char* v = std::getenv("TESSERA_LOCAL_PROGRESS");
    return v && std::strcmp(v, "calls") == 0 ? Progress::Calls : Progress::Posted;
  }();
  return mode;
}

std::unique_ptr<Backend> create(const BackendOptions& options) {
  auto world = std::dynamic_pointer_cast<World>(options.rendezvous);
  TESSERA_CHECK(world != nullptr, "comm backend 'local': options.rendezvous is ",
                options.rendezvous ? "'" + options.rendezvous->describe() + "'" : "empty",
                "; the local backend needs an in-process World; use comm::local::run(...) or pass "
                "a std::shared_ptr<comm::local::World> as the rendezvous");
  TESSERA_CHECK(world->size() == options.size, "comm backend 'local': options.size is ",
                options.size, " but the World has ", world->size(),
                " ranks; create the World with options.size ranks");
  return world->backend(options.rank, options.timeout);
}

Capabilities capabilities() noexcept {
  Capabilities caps;
  caps.cuda_memory = true;  // staged through the tensors' DeviceMemory (comm/device_staging.hpp)
  caps.cuda_staged = true;
  caps.all_to_all = true;
  caps.split = true;
  caps.multi_process = false;
  // A collective's data moves when its last rank posts it, whatever the others are doing; a
  // batch's sends are copied at the post and its receives copied out when complete.
  caps.overlaps_compute = progress_mode() == Progress::Posted;
  return caps;
}

}  // namespace tessera::comm::local
