// The CUDA staging decorator (see cuda_staging.hpp): pinned host buffers from a per-group pool,
// device → host copies when an operation starts, host → device copies when it completes, both on
// the group's staging stream.
#include "cuda_staging.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/core/error.hpp"

namespace tessera::comm {

namespace {

/// BackendError's code for a failed CUDA call (the message names the call and CUDA's error).
constexpr int kCudaFailure = 3;

std::string cuda_text(cudaError_t e) {
  return detail::cat(cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

/// A group's staging resources: pinned host blocks kept for reuse, and the stream every copy
/// between them and the device runs on. One per group; used by that group's thread only; shared
/// with the group's pending work, so it outlives both.
class PinnedPool {
 public:
  PinnedPool() = default;
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;
  ~PinnedPool() {
    if (stream_) {
      cudaStreamSynchronize(stream_);  // no copy still reads or writes a block below
      cudaStreamDestroy(stream_);
    }
    for (const Block& b : blocks_) cudaFreeHost(b.data);
  }

  /// The staging stream, created on the calling thread's current device at the first CUDA buffer
  /// (a process that passes none never initialises CUDA here). A *blocking* stream, so a copy is
  /// also ordered after work on the legacy default stream (a raw buffer filled by cudaMemcpy);
  /// work on non-blocking streams (the cuda compute backend's) is ordered by the host, which makes
  /// this stream wait for it before each call (tessera_comm_plugin_v1_stream). Copies may use it
  /// whatever the current device is (CUDA allows a copy on another device's stream).
  cudaStream_t stream(std::string_view backend, const std::string& where) {
    if (stream_) return stream_;
    const cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamDefault);
    if (e != cudaSuccess) {
      stream_ = nullptr;
      cudaGetLastError();  // not sticky: says nothing about later calls
      throw BackendError(
          std::string(backend), kCudaFailure,
          detail::cat(where, ": creating the staging stream (cudaStreamCreateWithFlags) failed: ",
                      cuda_text(e)));
    }
    return stream_;
  }
  /// The stream if it exists or can be made, else null (for the exported query, which never
  /// throws).
  cudaStream_t stream_or_null() noexcept {
    try {
      return stream("ucx", "staging stream");
    } catch (...) {
      return nullptr;
    }
  }

  /// The smallest free block of at least `bytes`, else a new one (rounded up to 64 KiB).
  void* acquire(std::size_t bytes, std::string_view backend, const std::string& where) {
    Block* best = nullptr;
    for (Block& b : blocks_)
      if (!b.used && b.bytes >= bytes && (!best || b.bytes < best->bytes)) best = &b;
    if (best) {
      best->used = true;
      return best->data;
    }
    const std::size_t size = (std::max<std::size_t>(bytes, 1) + kRound - 1) / kRound * kRound;
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    if (e != cudaSuccess)
      throw BackendError(std::string(backend), kCudaFailure,
                         detail::cat(where, ": cudaHostAlloc of ", size,
                                     " bytes for staging failed: ", cuda_text(e)));
    blocks_.push_back({p, size, true});
    return p;
  }
  void release(void* p) noexcept {
    for (Block& b : blocks_)
      if (b.data == p) b.used = false;
  }

 private:
  static constexpr std::size_t kRound = 64 * 1024;
  struct Block {
    void* data;
    std::size_t bytes;
    bool used;
  };
  std::vector<Block> blocks_;
  cudaStream_t stream_ = nullptr;
};

/// Throws BackendError ("<where>: <what> (<bytes> bytes, <call>) failed: <error>") unless `e` is
/// cudaSuccess.
void check(cudaError_t e, const std::string& backend, const std::string& where, const char* what,
           std::size_t bytes, const char* call) {
  if (e == cudaSuccess) return;
  throw BackendError(
      backend, kCudaFailure,
      detail::cat(where, ": ", what, " (", bytes, " bytes, ", call, ") failed: ", cuda_text(e)));
}

/// A device buffer and its pinned host copy.
struct Staged {
  void* device;
  void* host;
  std::size_t bytes;
};

/// Completes the wrapped operation, then copies its outputs back to the device.
class StagedWork final : public Work {
 public:
  StagedWork(std::shared_ptr<PinnedPool> pool, std::vector<void*> held, std::vector<Staged> outputs,
             std::string backend, std::string what)
      : pool_(std::move(pool)),
        held_(std::move(held)),
        outputs_(std::move(outputs)),
        backend_(std::move(backend)),
        what_(std::move(what)) {}
  ~StagedWork() override {
    inner_.reset();  // the operation is finished or cancelled before its buffers go back
    for (void* p : held_) pool_->release(p);
  }
  void set_inner(WorkPtr w) { inner_ = std::move(w); }

  bool is_completed() override {
    if (done_ || error_) return true;
    if (!inner_->is_completed()) return false;
    try {
      finish();
    } catch (...) {
      error_ = std::current_exception();
    }
    return true;
  }
  void wait() override {
    if (error_) std::rethrow_exception(error_);
    if (done_) return;
    finish();
  }
  std::optional<Moved> moved() const override {
    return done_ && inner_ ? inner_->moved() : std::nullopt;
  }

 private:
  /// The results go to the device on the staging stream, which waited (at the call) for the
  /// compute work issued before the call, so they land after every kernel that read the buffers
  /// before; the stream is then synchronised, so the data is in place (and the pinned blocks are
  /// free again) when this returns, before the caller's next compute is issued.
  void finish() {
    inner_->wait();
    if (!outputs_.empty()) {
      const cudaStream_t stream = pool_->stream(backend_, what_);
      std::size_t bytes = 0;
      for (const Staged& s : outputs_) {
        check(cudaMemcpyAsync(s.device, s.host, s.bytes, cudaMemcpyHostToDevice, stream), backend_,
              what_, "copying the result back to the device", s.bytes,
              "cudaMemcpyAsync host to device");
        bytes += s.bytes;
      }
      check(cudaStreamSynchronize(stream), backend_, what_,
            "copying the results back to the device", bytes,
            "cudaStreamSynchronize of the staging stream");
    }
    done_ = true;
    for (void* p : held_) pool_->release(p);
    held_.clear();
  }

  std::shared_ptr<PinnedPool> pool_;
  std::vector<void*> held_;
  std::vector<Staged> outputs_;
  std::string backend_, what_;
  WorkPtr inner_;
  bool done_ = false;
  std::exception_ptr error_;
};

class CudaStagedBackend final : public Backend {
 public:
  explicit CudaStagedBackend(std::unique_ptr<Backend> inner)
      : inner_(std::move(inner)), pool_(std::make_shared<PinnedPool>()) {}

  std::string_view name() const noexcept override { return inner_->name(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  Capabilities capabilities() const noexcept override {
    return staged_capabilities(inner_->capabilities());
  }
  std::chrono::milliseconds timeout() const noexcept override { return inner_->timeout(); }

  WorkPtr all_reduce(BufferView buf, ReduceOp op) override {
    if (buf.space == MemorySpace::Host) return inner_->all_reduce(buf, op);
    Call c(*this, "all_reduce");
    const BufferView h = c.stage(buf, /*in=*/true, /*out=*/true);
    return c.start(inner_->all_reduce(h, op));
  }
  WorkPtr all_gather(BufferView send, BufferView recv) override {
    if (send.space == MemorySpace::Host && recv.space == MemorySpace::Host)
      return inner_->all_gather(send, recv);
    Call c(*this, "all_gather");
    const BufferView s = c.stage(send, true, false), r = c.stage(recv, false, true);
    return c.start(inner_->all_gather(s, r));
  }
  WorkPtr reduce_scatter(BufferView send, BufferView recv, ReduceOp op) override {
    if (send.space == MemorySpace::Host && recv.space == MemorySpace::Host)
      return inner_->reduce_scatter(send, recv, op);
    Call c(*this, "reduce_scatter");
    const BufferView s = c.stage(send, true, false), r = c.stage(recv, false, true);
    return c.start(inner_->reduce_scatter(s, r, op));
  }
  WorkPtr broadcast(BufferView buf, int root) override {
    if (buf.space == MemorySpace::Host) return inner_->broadcast(buf, root);
    Call c(*this, "broadcast");
    const bool is_root =
        root == rank();  // the root's buffer is only read, the others' only written
    const BufferView h = c.stage(buf, is_root, !is_root);
    return c.start(inner_->broadcast(h, root));
  }
  WorkPtr all_to_all(BufferView send, BufferView recv) override {
    if (send.space == MemorySpace::Host && recv.space == MemorySpace::Host)
      return inner_->all_to_all(send, recv);
    Call c(*this, "all_to_all");
    const BufferView s = c.stage(send, true, false), r = c.stage(recv, false, true);
    return c.start(inner_->all_to_all(s, r));
  }
  WorkPtr batch_p2p(const std::vector<P2POp>& ops) override {
    if (std::none_of(ops.begin(), ops.end(),
                     [](const P2POp& o) { return o.buf.space == MemorySpace::Cuda; }))
      return inner_->batch_p2p(ops);
    Call c(*this, "batch_p2p");
    std::vector<P2POp> host = ops;
    for (P2POp& o : host) {
      const bool send = o.kind == P2POp::Kind::Send;
      o.buf = c.stage(o.buf, send, !send);
    }
    return c.start(inner_->batch_p2p(host));
  }
  /// The staging stream (created on the first call), or null where CUDA cannot make one.
  cudaStream_t stream() noexcept { return pool_->stream_or_null(); }

  /// Host buffers only: the inner backend's own plan. CUDA buffers are staged at every start.
  P2PPlanPtr prepare_p2p(const std::vector<P2POp>& ops) override {
    if (std::none_of(ops.begin(), ops.end(),
                     [](const P2POp& o) { return o.buf.space == MemorySpace::Cuda; }))
      return inner_->prepare_p2p(ops);
    return Backend::prepare_p2p(ops);
  }
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<Backend> split(const std::vector<int>& ranks) override {
    auto sub = inner_->split(ranks);
    return sub ? std::make_unique<CudaStagedBackend>(std::move(sub)) : nullptr;
  }

 private:
  /// One staged call: checks and copies its device buffers in, then wraps the started operation.
  /// Buffers taken from the pool go back if the call fails before the operation starts.
  class Call {
   public:
    Call(const CudaStagedBackend& b, const char* op)
        : b_(b), backend_(b.inner_->name()), what_(detail::cat("rank ", b.rank(), ": ", op)) {}
    ~Call() {
      for (void* p : held_) b_.pool_->release(p);
    }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

    /// The host view the wrapped backend gets for `v` (itself when it is host memory). An input
    /// is copied on the staging stream, which the host made wait for the work that produced it
    /// (or which follows the legacy default stream's work, for a raw buffer), and the stream is
    /// synchronised: the bytes are on the host when this returns.
    BufferView stage(const BufferView& v, bool in, bool out) {
      if (v.space == MemorySpace::Host || v.count == 0)
        return {v.data, v.count, v.dtype, MemorySpace::Host};
      check_device_pointer(v.data);
      const cudaStream_t stream = b_.pool_->stream(backend_, what_);
      void* host = b_.pool_->acquire(v.bytes(), backend_, what_);
      held_.push_back(host);
      if (in) {
        check(cudaMemcpyAsync(host, v.data, v.bytes(), cudaMemcpyDeviceToHost, stream), backend_,
              what_, "staging the input", v.bytes(), "cudaMemcpyAsync device to host");
        check(cudaStreamSynchronize(stream), backend_, what_, "staging the input", v.bytes(),
              "cudaStreamSynchronize of the staging stream");
      }
      if (out) outputs_.push_back({v.data, host, v.bytes()});
      return {host, v.count, v.dtype, MemorySpace::Host};
    }
    WorkPtr start(WorkPtr inner) {
      auto w = std::make_unique<StagedWork>(b_.pool_, std::move(held_), std::move(outputs_),
                                            backend_, what_);
      held_.clear();
      w->set_inner(std::move(inner));
      return w;
    }

   private:
    void check_device_pointer(const void* p) const {
      if (!p)
        throw InvalidArgument(detail::cat(backend_, ": ", what_,
                                          ": a CUDA buffer of non-zero count has a null pointer"));
      cudaPointerAttributes a{};
      const cudaError_t e = cudaPointerGetAttributes(&a, p);
      if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
          e == cudaErrorInitializationError || e == cudaErrorCudartUnloading)
        throw BackendError(
            backend_, kCudaFailure,
            detail::cat(what_,
                        ": a CUDA buffer was passed but CUDA is not usable in this process: ",
                        cuda_text(e)));
      if (e != cudaSuccess) {
        cudaGetLastError();
        throw InvalidArgument(
            detail::cat(backend_, ": ", what_,
                        ": the buffer is marked MemorySpace::Cuda but CUDA does not know it (",
                        cuda_text(e), ")"));
      }
      if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
        throw InvalidArgument(
            detail::cat(backend_, ": ", what_,
                        ": the buffer is marked MemorySpace::Cuda but is host memory; pass "
                        "a cudaMalloc'ed pointer, or mark it MemorySpace::Host"));
    }

    const CudaStagedBackend& b_;
    std::string backend_, what_;
    std::vector<void*> held_;
    std::vector<Staged> outputs_;
  };

  std::unique_ptr<Backend> inner_;
  std::shared_ptr<PinnedPool> pool_;
};

}  // namespace

std::unique_ptr<Backend> stage_cuda_through_host(std::unique_ptr<Backend> host_only) {
  TESSERA_CHECK(host_only != nullptr, "stage_cuda_through_host: no backend given");
  return std::make_unique<CudaStagedBackend>(std::move(host_only));
}

void* staging_stream(Backend& b) noexcept {
  auto* s = dynamic_cast<CudaStagedBackend*>(&b);
  return s ? static_cast<void*>(s->stream()) : nullptr;
}

}  // namespace tessera::comm
