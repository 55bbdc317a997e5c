// NcclBackend: argument checks, the collectives, grouped send/recv, split, create, and the
// plugin's exported entry point and probe.
#include "nccl_backend.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include "tessera/comm/plugin_export.hpp"
#include "tessera/core/error.hpp"

namespace tessera::comm::nccl {

ncclDataType_t nccl_type(core::DType t) noexcept {
  switch (t) {
    case core::DType::F32: return ncclFloat32;
    case core::DType::F64: return ncclFloat64;
    case core::DType::BF16: return ncclBfloat16;
    case core::DType::F16: return ncclFloat16;
    case core::DType::I32: return ncclInt32;
    case core::DType::I64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

namespace {

/// Completion of one enqueued operation: a CUDA event recorded after it on the group's stream.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<Comm> comm, std::string where, std::string what, Clock::time_point deadline,
           std::string waiting_for)
      : comm_(std::move(comm)), where_(std::move(where)), what_(std::move(what)), deadline_(deadline),
        waiting_for_(std::move(waiting_for)) {
    cudaError_t e = cudaEventCreateWithFlags(&ev_, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ev_, comm_->stream());
    if (e != cudaSuccess) comm_->fail(Comm::Failure::System, detail::cat(where_, ": ", what_, ": recording its "
                                                                         "completion event: ", cuda_text(e)));
  }
  ~NcclWork() override {
    if (ev_) cudaEventDestroy(ev_);  // legal while pending: released once the stream passes it
  }
  bool is_completed() override {
    if (done_) return true;
    try {
      done_ = comm_->poll(ev_, where_, what_);
    } catch (...) {
      error_ = std::current_exception();
      done_ = true;
    }
    return done_;
  }
  void wait() override {
    if (!done_) {
      try {
        comm_->wait(ev_, deadline_, where_, what_, waiting_for_);
      } catch (...) {
        error_ = std::current_exception();
      }
      done_ = true;
    }
    if (error_) {
      auto e = error_;
      error_ = nullptr;  // thrown once; waiting again is a no-op
      std::rethrow_exception(e);
    }
  }

 private:
  std::shared_ptr<Comm> comm_;
  std::string where_, what_;
  Clock::time_point deadline_;
  std::string waiting_for_;
  cudaEvent_t ev_ = nullptr;
  bool done_ = false;
  std::exception_ptr error_;
};

std::string label(core::DType t, std::size_t count) { return detail::cat(core::dtype_name(t), " count ", count); }

/// Throws the error ncclGroupStart/Send/Recv returned inside a group after closing the group.
void check_in_group(ncclResult_t r, Comm& comm, const std::string& where, const std::string& what) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  ncclGroupEnd();
  comm.settle(r, where, what, Clock::now());
}

}  // namespace

NcclBackend::NcclBackend(std::shared_ptr<Comm> comm, std::vector<int> members, int rank, bool world)
    : comm_(std::move(comm)), members_(std::move(members)), rank_(rank), world_(world) {}

Capabilities capabilities() {
  Capabilities c{/*cuda_memory=*/true, /*all_to_all=*/true, /*split=*/true, /*multi_process=*/true};
  c.overlaps_compute = true;  // every operation runs on the communicator's CUDA stream
  return c;
}
Capabilities NcclBackend::capabilities() const noexcept { return nccl::capabilities(); }

std::string NcclBackend::where() const {
  if (world_) return detail::cat("rank ", rank_);
  return detail::cat("rank ", rank_, " (world rank ", comm_->world_rank(), ")");
}

std::string NcclBackend::others() const {
  std::string s;
  for (int r = 0; r < size(); ++r)
    if (r != rank_) s += detail::cat(s.empty() ? "" : ", ", r);
  if (s.empty()) return "this rank's own GPU work";
  return (size() == 2 ? "rank " : "ranks ") + s + " (the ones that have not called it, or are gone)";
}

void NcclBackend::check_buffer(const BufferView& b, const std::string& what, const char* role) const {
  if (b.space != MemorySpace::Cuda)
    throw Unsupported(detail::cat("nccl: ", where(), ": ", what, ": the ", role,
                                  " buffer is host memory; the nccl backend takes CUDA device buffers only (copy "
                                  "it to the device first, or use the ucx or local backend for host tensors)"));
  if (b.count == 0) return;
  TESSERA_CHECK(b.data != nullptr, "nccl: ", where(), ": ", what, ": the ", role, " buffer is null");
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, b.data);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear it: it says nothing about the device's state
    throw InvalidArgument(detail::cat("nccl: ", where(), ": ", what, ": the ", role,
                                      " buffer is not CUDA memory (cudaPointerGetAttributes: ", cuda_text(e), ")"));
  }
  TESSERA_CHECK(a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged, "nccl: ", where(), ": ", what,
                ": the ", role, " buffer is marked MemorySpace::Cuda but is host memory; pass a cudaMalloc'ed pointer");
  TESSERA_CHECK(a.type == cudaMemoryTypeManaged || a.device == comm_->device(), "nccl: ", where(), ": ", what,
                ": the ", role, " buffer lives on CUDA device ", a.device, " but this rank's communicator uses device ",
                comm_->device(), "; allocate it after cudaSetDevice(", comm_->device(), ")");
}

WorkPtr NcclBackend::finish(const std::string& what, Clock::time_point deadline, std::string waiting_for) {
  return std::make_unique<NcclWork>(comm_, where(), what, deadline, std::move(waiting_for));
}

WorkPtr NcclBackend::all_reduce(BufferView buf, ReduceOp op) {
  const std::string what =
      detail::cat("all_reduce #", seq_++, " (", core::dtype_name(buf.dtype), " ", reduce_op_name(op), " count ",
                  buf.count, ")");
  check_buffer(buf, what, "data");
  comm_->begin(where(), what);
  const auto deadline = Clock::now() + timeout();
  comm_->settle(ncclAllReduce(buf.data, buf.data, buf.count, nccl_type(buf.dtype), nccl_op(op), comm_->get(),
                              comm_->stream()),
                where(), what, deadline);
  return finish(what, deadline, others());
}

WorkPtr NcclBackend::all_gather(BufferView send, BufferView recv) {
  const std::string what = detail::cat("all_gather #", seq_++, " (", label(send.dtype, send.count), ")");
  TESSERA_CHECK(send.dtype == recv.dtype, "nccl: ", where(), ": ", what, ": send is ", core::dtype_name(send.dtype),
                " but recv is ", core::dtype_name(recv.dtype));
  TESSERA_CHECK(recv.count == send.count * static_cast<std::size_t>(size()), "nccl: ", where(), ": ", what,
                ": recv has ", recv.count, " elements, expected size() * send.count = ", size(), " * ", send.count);
  check_buffer(send, what, "send");
  check_buffer(recv, what, "recv");
  comm_->begin(where(), what);
  const auto deadline = Clock::now() + timeout();
  comm_->settle(ncclAllGather(send.data, recv.data, send.count, nccl_type(send.dtype), comm_->get(), comm_->stream()),
                where(), what, deadline);
  return finish(what, deadline, others());
}

WorkPtr NcclBackend::reduce_scatter(BufferView send, BufferView recv, ReduceOp op) {
  const std::string what = detail::cat("reduce_scatter #", seq_++, " (", core::dtype_name(recv.dtype), " ",
                                       reduce_op_name(op), " count ", recv.count, " per rank)");
  TESSERA_CHECK(send.dtype == recv.dtype, "nccl: ", where(), ": ", what, ": send is ", core::dtype_name(send.dtype),
                " but recv is ", core::dtype_name(recv.dtype));
  TESSERA_CHECK(send.count == recv.count * static_cast<std::size_t>(size()), "nccl: ", where(), ": ", what,
                ": send has ", send.count, " elements, expected size() * recv.count = ", size(), " * ", recv.count);
  check_buffer(send, what, "send");
  check_buffer(recv, what, "recv");
  comm_->begin(where(), what);
  const auto deadline = Clock::now() + timeout();
  comm_->settle(ncclReduceScatter(send.data, recv.data, recv.count, nccl_type(recv.dtype), nccl_op(op), comm_->get(),
                                  comm_->stream()),
                where(), what, deadline);
  return finish(what, deadline, others());
}

WorkPtr NcclBackend::broadcast(BufferView buf, int root) {
  const std::string what =
      detail::cat("broadcast #", seq_++, " (", label(buf.dtype, buf.count), " root ", root, ")");
  TESSERA_CHECK(root >= 0 && root < size(), "nccl: ", where(), ": ", what, ": root ", root,
                " is outside this group of ", size(), " ranks");
  check_buffer(buf, what, "data");
  comm_->begin(where(), what);
  const auto deadline = Clock::now() + timeout();
  comm_->settle(ncclBroadcast(buf.data, buf.data, buf.count, nccl_type(buf.dtype), root, comm_->get(),
                              comm_->stream()),
                where(), what, deadline);
  return finish(what, deadline, rank_ == root ? others() : detail::cat("root rank ", root));
}

WorkPtr NcclBackend::batch_p2p(const std::vector<P2POp>& ops) {
  const std::string what = detail::cat("batch_p2p #", seq_++, " (", ops.size(), " ops)");
  for (const auto& o : ops) {
    TESSERA_CHECK(o.peer >= 0 && o.peer < size(), "nccl: ", where(), ": batch_p2p to/from rank ", o.peer,
                  " outside this group of ", size(), " ranks");
    TESSERA_CHECK(o.tag >= 0, "nccl: ", where(), ": batch_p2p tag ", o.tag, " is negative");
    check_buffer(o.buf, what, o.kind == P2POp::Kind::Send ? "send" : "receive");
  }
  // NCCL matches the sends and receives between a pair in posting order (it has no tags). Both
  // sides post in (tag, call order), so a pair of ranks agrees on the pairing exactly when the
  // contract's "in order per tag" does.
  std::vector<std::size_t> order(ops.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ops[a].tag < ops[b].tag; });
  std::set<int> peers;
  std::size_t posted = 0;
  comm_->begin(where(), what);
  const auto deadline = Clock::now() + timeout();
  check_in_group(ncclGroupStart(), *comm_, where(), what);
  for (std::size_t i : order) {
    const P2POp& o = ops[i];
    if (o.buf.count == 0) continue;  // both sides skip it (counts match by contract)
    const auto r = o.kind == P2POp::Kind::Send
                       ? ncclSend(o.buf.data, o.buf.bytes(), ncclInt8, o.peer, comm_->get(), comm_->stream())
                       : ncclRecv(o.buf.data, o.buf.bytes(), ncclInt8, o.peer, comm_->get(), comm_->stream());
    check_in_group(r, *comm_, where(), detail::cat(what, ": ", o.kind == P2POp::Kind::Send ? "send to" : "receive from",
                                                    " rank ", o.peer, " tag ", o.tag));
    peers.insert(o.peer);
    ++posted;
  }
  comm_->settle(ncclGroupEnd(), where(), what, deadline);
  if (posted == 0) return std::make_unique<CompletedWork>();
  std::string waiting;
  for (int p : peers) waiting += detail::cat(waiting.empty() ? "rank " : ", ", p);
  return finish(what, deadline, waiting + " (a peer that has not posted the matching operations, or is gone)");
}

void NcclBackend::barrier() {
  const std::string what = detail::cat("barrier #", seq_++);
  comm_->begin(where(), what);
  const auto deadline = Clock::now() + timeout();
  float* x = comm_->scratch();
  comm_->settle(ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, comm_->get(), comm_->stream()), where(), what, deadline);
  finish(what, deadline, others())->wait();
}

WorkPtr NcclBackend::all_to_all(BufferView send, BufferView recv) {
  const std::string what = detail::cat("all_to_all #", seq_++, " (", label(send.dtype, send.count), ")");
  const auto n = static_cast<std::size_t>(size());
  TESSERA_CHECK(send.dtype == recv.dtype, "nccl: ", where(), ": ", what, ": send is ", core::dtype_name(send.dtype),
                " but recv is ", core::dtype_name(recv.dtype));
  TESSERA_CHECK(send.count == recv.count && send.count % n == 0, "nccl: ", where(), ": ", what,
                ": send and recv must both hold size() * block elements (send ", send.count, ", recv ", recv.count,
                ", size ", n, ")");
  check_buffer(send, what, "send");
  check_buffer(recv, what, "recv");
  comm_->begin(where(), what);
  const auto deadline = Clock::now() + timeout();
  const std::size_t block_bytes = send.bytes() / n;
  if (block_bytes > 0) {
    check_in_group(ncclGroupStart(), *comm_, where(), what);
    for (std::size_t r = 0; r < n; ++r) {
      const int peer = static_cast<int>(r);
      check_in_group(ncclRecv(static_cast<char*>(recv.data) + r * block_bytes, block_bytes, ncclInt8, peer,
                              comm_->get(), comm_->stream()),
                     *comm_, where(), detail::cat(what, ": receive from rank ", peer));
      check_in_group(ncclSend(static_cast<const char*>(send.data) + r * block_bytes, block_bytes, ncclInt8, peer,
                              comm_->get(), comm_->stream()),
                     *comm_, where(), detail::cat(what, ": send to rank ", peer));
    }
    comm_->settle(ncclGroupEnd(), where(), what, deadline);
  }
  return finish(what, deadline, others());
}

std::unique_ptr<Backend> NcclBackend::split(const std::vector<int>& ranks) {
  std::set<int> seen;
  for (int r : ranks) {
    TESSERA_CHECK(r >= 0 && r < size(), "nccl: ", where(), ": split lists rank ", r, " outside this group of ", size(),
                  " ranks");
    TESSERA_CHECK(seen.insert(r).second, "nccl: ", where(), ": split lists rank ", r, " twice");
  }
  const auto pos = std::find(ranks.begin(), ranks.end(), rank_);
  const bool member = pos != ranks.end();
  // Sub-groups of one split are disjoint, so the smallest member names each one.
  const int color = member ? *std::min_element(ranks.begin(), ranks.end()) : NCCL_SPLIT_NOCOLOR;
  const int key = member ? static_cast<int>(pos - ranks.begin()) : 0;
  auto sub = comm_->split(color, key, where());
  if (!sub) return nullptr;
  int n = 0, r = 0;
  ncclCommCount(sub->get(), &n);
  ncclCommUserRank(sub->get(), &r);
  TESSERA_CHECK(n == static_cast<int>(ranks.size()) && r == key, "nccl: ", where(),
                ": split lists disagree: this rank listed ", ranks.size(), " ranks and expected to be rank ", key,
                " of them, but NCCL formed a group of ", n, " in which it is rank ", r,
                "; every member must pass the same list");
  std::vector<int> world;
  for (int m : ranks) world.push_back(members_[static_cast<std::size_t>(m)]);
  return std::make_unique<NcclBackend>(std::move(sub), std::move(world), key, false);
}

void* stream_of(Backend& b) noexcept {
  auto* n = dynamic_cast<NcclBackend*>(&b);
  return n ? static_cast<void*>(n->stream()) : nullptr;
}

std::unique_ptr<Backend> create(const BackendOptions& options) {
  TESSERA_CHECK(options.rendezvous && options.rendezvous->store(),
                "comm backend 'nccl' needs a rendezvous with a key-value store (env://) to share NCCL's unique id; "
                "run the ranks with tessera launch, torchrun-style variables, mpirun or srun");
  TESSERA_CHECK(options.size >= 1 && options.rank >= 0 && options.rank < options.size, "comm backend 'nccl': rank ",
                options.rank, " of ", options.size, " is out of range");
  auto comm = Comm::create_world(options.rendezvous, options.rank, options.size, options.timeout);
  std::vector<int> members(static_cast<std::size_t>(options.size));
  std::iota(members.begin(), members.end(), 0);
  return std::make_unique<NcclBackend>(std::move(comm), std::move(members), options.rank, true);
}

}  // namespace tessera::comm::nccl

extern "C" __attribute__((visibility("default"))) const tessera_comm_plugin_v1_t* tessera_comm_plugin_v1(void) {
  static const tessera_comm_plugin_v1_t table = tessera::comm::plugin::make_table<&tessera::comm::nccl::create>(
      "nccl", "NCCL " TESSERA_NCCL_BUILT_VERSION " collectives and grouped send/recv on CUDA device buffers",
      tessera::comm::nccl::capabilities());
  return &table;
}

// Optional probe (plugin_v1.h): NULL when this process can run the backend, else why not.
extern "C" __attribute__((visibility("default"))) const char* tessera_comm_plugin_v1_probe(void) {
  static const std::string why = tessera::comm::nccl::unavailable_reason();
  return why.empty() ? nullptr : why.c_str();
}

// Optional (plugin_v1.h): the stream a group's operations run on. Before each call with device
// tensors the host makes it wait for an event recorded on their compute stream (no host wait), so
// NCCL reads them after the kernels that wrote them and writes them after the kernels that read
// them before. Completion is the Work's event, waited for on the host (see README.md, Streams).
extern "C" __attribute__((visibility("default"))) void* tessera_comm_plugin_v1_stream(void* ctx) {
  return tessera::comm::nccl::stream_of(tessera::comm::plugin::backend_of(ctx));
}

// Optional (plugin_v1.h): operations progress on the CUDA stream while the caller computes.
extern "C" __attribute__((visibility("default"))) int tessera_comm_plugin_v1_overlaps(void) {
  return tessera::comm::nccl::capabilities().overlaps_compute ? 1 : 0;
}
