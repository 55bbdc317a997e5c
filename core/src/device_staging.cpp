// The device staging decorator (see tessera/comm/device_staging.hpp): host blocks from a
// per-group pool, device → host copies when an operation starts, host → device when it completes.
#include "tessera/comm/device_staging.hpp"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"

namespace tessera::comm {

namespace {

/// Host blocks kept for reuse; one pool per group, used by that group's thread only.
class HostPool {
 public:
  /// The smallest free block of at least `bytes`, else a new one.
  void* acquire(std::size_t bytes) {
    Block* best = nullptr;
    for (Block& b : blocks_)
      if (!b.used && b.bytes >= bytes && (!best || b.bytes < best->bytes)) best = &b;
    if (!best) {
      const std::size_t size = std::max<std::size_t>(bytes, 64);
      blocks_.push_back({std::make_unique<std::byte[]>(size), size, false});
      best = &blocks_.back();
    }
    best->used = true;
    return best->data.get();
  }
  void release(void* p) noexcept {
    for (Block& b : blocks_)
      if (b.data.get() == p) b.used = false;
  }

 private:
  struct Block {
    std::unique_ptr<std::byte[]> data;
    std::size_t bytes;
    bool used;
  };
  std::vector<Block> blocks_;  // std::vector of unique_ptr blocks: addresses stay put on growth
};

/// A device buffer and its host copy.
struct Staged {
  core::DeviceMemory* memory;
  void* device;
  void* host;
  std::size_t bytes;
};

/// Completes the wrapped operation, then copies its outputs back to the device.
class StagedWork final : public Work {
 public:
  StagedWork(std::shared_ptr<HostPool> pool, std::vector<void*> held, std::vector<Staged> outputs,
             std::string what)
      : pool_(std::move(pool)), held_(std::move(held)), outputs_(std::move(outputs)), what_(std::move(what)) {}
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
  void finish() {
    inner_->wait();
    for (const Staged& s : outputs_) s.memory->copy_bytes(s.device, s.host, s.bytes);
    done_ = true;
    for (void* p : held_) pool_->release(p);
    held_.clear();
  }

  std::shared_ptr<HostPool> pool_;
  std::vector<void*> held_;
  std::vector<Staged> outputs_;
  std::string what_;
  WorkPtr inner_;
  bool done_ = false;
  std::exception_ptr error_;
};

bool any_device(const std::vector<P2POp>& ops) {
  return std::any_of(ops.begin(), ops.end(), [](const P2POp& o) { return o.buf.space != MemorySpace::Host; });
}

class DeviceStagedBackend final : public Backend {
 public:
  explicit DeviceStagedBackend(std::unique_ptr<Backend> inner)
      : inner_(std::move(inner)), pool_(std::make_shared<HostPool>()) {}

  std::string_view name() const noexcept override { return inner_->name(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  Capabilities capabilities() const noexcept override {
    Capabilities c = inner_->capabilities();
    c.cuda_memory = true;
    c.cuda_staged = true;
    return c;
  }
  std::chrono::milliseconds timeout() const noexcept override { return inner_->timeout(); }

  WorkPtr all_reduce(BufferView buf, ReduceOp op) override {
    if (buf.space == MemorySpace::Host) return inner_->all_reduce(buf, op);
    Call c(*this, "all_reduce");
    const BufferView h = c.stage(buf, true, true);
    return c.start(inner_->all_reduce(h, op));
  }
  WorkPtr all_gather(BufferView send, BufferView recv) override {
    if (send.space == MemorySpace::Host && recv.space == MemorySpace::Host) return inner_->all_gather(send, recv);
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
    const bool is_root = root == rank();  // the root's buffer is only read, the others' only written
    const BufferView h = c.stage(buf, is_root, !is_root);
    return c.start(inner_->broadcast(h, root));
  }
  WorkPtr all_to_all(BufferView send, BufferView recv) override {
    if (send.space == MemorySpace::Host && recv.space == MemorySpace::Host) return inner_->all_to_all(send, recv);
    Call c(*this, "all_to_all");
    const BufferView s = c.stage(send, true, false), r = c.stage(recv, false, true);
    return c.start(inner_->all_to_all(s, r));
  }
  WorkPtr batch_p2p(const std::vector<P2POp>& ops) override {
    if (!any_device(ops)) return inner_->batch_p2p(ops);
    Call c(*this, "batch_p2p");
    std::vector<P2POp> host = ops;
    for (P2POp& o : host) {
      const bool send = o.kind == P2POp::Kind::Send;
      o.buf = c.stage(o.buf, send, !send);
    }
    return c.start(inner_->batch_p2p(host));
  }
  /// Host buffers only: the inner backend's own plan; device buffers are staged at every start.
  P2PPlanPtr prepare_p2p(const std::vector<P2POp>& ops) override {
    if (!any_device(ops)) return inner_->prepare_p2p(ops);
    return Backend::prepare_p2p(ops);
  }
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<Backend> split(const std::vector<int>& ranks) override {
    auto sub = inner_->split(ranks);
    return sub ? std::make_unique<DeviceStagedBackend>(std::move(sub)) : nullptr;
  }

 private:
  /// One staged call: copies its device buffers in, then wraps the started operation. Blocks
  /// taken from the pool go back if the call fails before the operation starts.
  class Call {
   public:
    Call(const DeviceStagedBackend& b, const char* op)
        : b_(b), what_(detail::cat(b.inner_->name(), " rank ", b.rank(), ": ", op)) {}
    ~Call() {
      for (void* p : held_) b_.pool_->release(p);
    }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

    /// The host view the wrapped backend gets for `v` (itself when it is host memory).
    BufferView stage(const BufferView& v, bool in, bool out) {
      if (v.space == MemorySpace::Host) return v;
      if (v.count == 0) return {v.data, 0, v.dtype, MemorySpace::Host, nullptr};
      TESSERA_CHECK(v.data != nullptr, what_, ": a ", core::memory_space_name(v.space),
                    " buffer of ", v.count, " elements has a null pointer");
      TESSERA_CHECK(v.device != nullptr, what_, ": a ", core::memory_space_name(v.space),
                    " buffer without its DeviceMemory (BufferView::device); this backend moves "
                    "host memory and stages device buffers through the memory that owns them: "
                    "pass a tensor's buffer (comm::buffer_of) or set BufferView::device");
      void* host = b_.pool_->acquire(v.bytes());
      held_.push_back(host);
      if (in) v.device->copy_bytes(host, v.data, v.bytes());
      if (out) outputs_.push_back({v.device, v.data, host, v.bytes()});
      return {host, v.count, v.dtype, MemorySpace::Host, nullptr};
    }
    WorkPtr start(WorkPtr inner) {
      auto w = std::make_unique<StagedWork>(b_.pool_, std::move(held_), std::move(outputs_), what_);
      held_.clear();
      w->set_inner(std::move(inner));
      return w;
    }

   private:
    const DeviceStagedBackend& b_;
    std::string what_;
    std::vector<void*> held_;
    std::vector<Staged> outputs_;
  };

  std::unique_ptr<Backend> inner_;
  std::shared_ptr<HostPool> pool_;
};

}  // namespace

std::unique_ptr<Backend> stage_device_buffers(std::unique_ptr<Backend> host_only) {
  TESSERA_CHECK(host_only != nullptr, "stage_device_buffers: no backend given");
  return std::make_unique<DeviceStagedBackend>(std::move(host_only));
}

}  // namespace tessera::comm
