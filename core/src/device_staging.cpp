// The device staging decorator (see tessera/comm/device_staging.hpp): host blocks from a
// per-group pool, device → host copies when an operation starts, host → device when it
// completes, through the group's StagingCopier; and core's copier, through DeviceMemory.
#include "tessera/comm/device_staging.hpp"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "tessera/comm/forwarding.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"

namespace tessera::comm {

namespace {

/// Core's copier: through the DeviceMemory each buffer names, into plain host blocks.
class DeviceMemoryCopier final : public StagingCopier {
 public:
  std::unique_ptr<StagingCopier> for_sub_group() const override {
    return std::make_unique<DeviceMemoryCopier>();
  }
  void check(const BufferView& v, const StagingSite& site) override {
    TESSERA_CHECK(v.data != nullptr, site.backend, " ", site.what, ": a ",
                  core::memory_space_name(v.space), " buffer of ", v.count,
                  " elements has a null pointer");
    TESSERA_CHECK(v.device != nullptr, site.backend, " ", site.what, ": a ",
                  core::memory_space_name(v.space),
                  " buffer without its DeviceMemory (BufferView::device); this backend moves "
                  "host memory and stages device buffers through the memory that owns them: "
                  "pass a tensor's buffer (comm::buffer_of) or set BufferView::device");
  }
  void* allocate_host(std::size_t bytes, std::size_t& got, const StagingSite&) override {
    got = std::max<std::size_t>(bytes, 64);
    return new std::byte[got];
  }
  void free_host(void* p) noexcept override { delete[] static_cast<std::byte*>(p); }
  void to_host(void* host, const BufferView& v, const StagingSite&) override {
    v.device->copy_bytes(host, v.data, v.bytes());
  }
  void to_device(const std::vector<StagedOutput>& outputs, const StagingSite&) override {
    for (const StagedOutput& o : outputs)
      o.device.device->copy_bytes(o.device.data, o.host, o.device.bytes());
  }
};

/// A group's host blocks, kept for reuse, and the copier that fills them; used by that group's
/// thread only, shared with the group's pending work so that it outlives both.
class HostPool {
 public:
  explicit HostPool(std::unique_ptr<StagingCopier> copier) : copier_(std::move(copier)) {}
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;
  ~HostPool() {
    for (const Block& b : blocks_) copier_->free_host(b.data);
  }

  StagingCopier& copier() noexcept { return *copier_; }

  /// The smallest free block of at least `bytes`, else a new one.
  void* acquire(std::size_t bytes, const StagingSite& site) {
    Block* best = nullptr;
    for (Block& b : blocks_)
      if (!b.used && b.bytes >= bytes && (!best || b.bytes < best->bytes)) best = &b;
    if (best) {
      best->used = true;
      return best->data;
    }
    std::size_t got = 0;
    void* p = copier_->allocate_host(bytes, got, site);
    blocks_.push_back({p, got, true});
    return p;
  }
  void release(void* p) noexcept {
    for (Block& b : blocks_)
      if (b.data == p) b.used = false;
  }

 private:
  struct Block {
    void* data;
    std::size_t bytes;
    bool used;
  };
  std::unique_ptr<StagingCopier> copier_;
  std::vector<Block> blocks_;
};

/// Completes the wrapped operation, then copies its outputs back to the device.
class StagedWork final : public Work {
 public:
  StagedWork(std::shared_ptr<HostPool> pool, std::vector<void*> held,
             std::vector<StagedOutput> outputs, std::string backend, std::string what)
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
  void finish() {
    inner_->wait();
    if (!outputs_.empty()) pool_->copier().to_device(outputs_, {backend_, what_});
    done_ = true;
    for (void* p : held_) pool_->release(p);
    held_.clear();
  }

  std::shared_ptr<HostPool> pool_;
  std::vector<void*> held_;
  std::vector<StagedOutput> outputs_;
  std::string backend_, what_;
  WorkPtr inner_;
  bool done_ = false;
  std::exception_ptr error_;
};

bool all_host(const std::vector<P2POp>& ops) {
  return std::all_of(ops.begin(), ops.end(),
                     [](const P2POp& o) { return o.buf.space == MemorySpace::Host; });
}
bool all_host(const BufferView& a, const BufferView& b) {
  return a.space == MemorySpace::Host && b.space == MemorySpace::Host;
}

class DeviceStagedBackend final : public ForwardingBackend {
 public:
  DeviceStagedBackend(std::unique_ptr<Backend> inner, std::unique_ptr<StagingCopier> copier)
      : ForwardingBackend(std::move(inner)), pool_(std::make_shared<HostPool>(std::move(copier))) {}

  StagingCopier& copier() noexcept { return pool_->copier(); }

  Capabilities capabilities() const noexcept override {
    return staged_capabilities(inner().capabilities());
  }
  WorkPtr all_reduce(BufferView buf, ReduceOp op) override {
    if (buf.space == MemorySpace::Host) return inner().all_reduce(buf, op);
    Call c(*this, "all_reduce");
    const BufferView h = c.stage(buf, /*in=*/true, /*out=*/true);
    return c.start(inner().all_reduce(h, op));
  }
  WorkPtr all_gather(BufferView send, BufferView recv) override {
    if (all_host(send, recv)) return inner().all_gather(send, recv);
    return staged_pair("all_gather", send, recv,
                       [&](BufferView s, BufferView r) { return inner().all_gather(s, r); });
  }
  WorkPtr reduce_scatter(BufferView send, BufferView recv, ReduceOp op) override {
    if (all_host(send, recv)) return inner().reduce_scatter(send, recv, op);
    return staged_pair("reduce_scatter", send, recv, [&](BufferView s, BufferView r) {
      return inner().reduce_scatter(s, r, op);
    });
  }
  WorkPtr broadcast(BufferView buf, int root) override {
    if (buf.space == MemorySpace::Host) return inner().broadcast(buf, root);
    Call c(*this, "broadcast");
    const bool is_root = root == rank();  // the root's buffer is only read, the others' written
    const BufferView h = c.stage(buf, is_root, !is_root);
    return c.start(inner().broadcast(h, root));
  }
  WorkPtr all_to_all(BufferView send, BufferView recv) override {
    if (all_host(send, recv)) return inner().all_to_all(send, recv);
    return staged_pair("all_to_all", send, recv,
                       [&](BufferView s, BufferView r) { return inner().all_to_all(s, r); });
  }
  WorkPtr batch_p2p(const std::vector<P2POp>& ops) override {
    if (all_host(ops)) return inner().batch_p2p(ops);
    Call c(*this, "batch_p2p");
    std::vector<P2POp> host = ops;
    for (P2POp& o : host) {
      const bool send = o.kind == P2POp::Kind::Send;
      o.buf = c.stage(o.buf, send, !send);
    }
    return c.start(inner().batch_p2p(host));
  }

 protected:
  std::unique_ptr<Backend> decorate_split(std::unique_ptr<Backend> sub,
                                          const std::vector<int>&) override {
    return std::make_unique<DeviceStagedBackend>(std::move(sub), copier().for_sub_group());
  }

 private:
  /// A call that reads `send` and writes `recv` (all_gather, reduce_scatter, all_to_all), run by
  /// `run` on their host views.
  template <class Run>
  WorkPtr staged_pair(const char* op, BufferView send, BufferView recv, Run&& run) {
    Call c(*this, op);
    const BufferView s = c.stage(send, true, false), r = c.stage(recv, false, true);
    return c.start(run(s, r));
  }

  /// One staged call: checks and copies its device buffers in, then wraps the started operation.
  /// Blocks taken from the pool go back if the call fails before the operation starts.
  class Call {
   public:
    Call(DeviceStagedBackend& b, const char* op)
        : b_(b), backend_(b.inner().name()), what_(detail::cat("rank ", b.rank(), ": ", op)) {}
    ~Call() {
      for (void* p : held_) b_.pool_->release(p);
    }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

    /// The host view the wrapped backend gets for `v` (itself when it is host memory).
    BufferView stage(const BufferView& v, bool in, bool out) {
      if (v.space == MemorySpace::Host) return v;
      if (v.count == 0) return {v.data, 0, v.dtype, MemorySpace::Host, nullptr};
      const StagingSite site{backend_, what_};
      b_.copier().check(v, site);
      void* host = b_.pool_->acquire(v.bytes(), site);
      held_.push_back(host);
      if (in) b_.copier().to_host(host, v, site);
      if (out) outputs_.push_back({v, host});
      return {host, v.count, v.dtype, MemorySpace::Host, nullptr};
    }
    WorkPtr start(WorkPtr inner) {
      auto w = std::make_unique<StagedWork>(b_.pool_, std::move(held_), std::move(outputs_),
                                            backend_, what_);
      held_.clear();
      w->set_inner(std::move(inner));
      return w;
    }

   private:
    DeviceStagedBackend& b_;
    std::string backend_, what_;
    std::vector<void*> held_;
    std::vector<StagedOutput> outputs_;
  };

  std::shared_ptr<HostPool> pool_;
};

}  // namespace

std::unique_ptr<Backend> stage_device_buffers(std::unique_ptr<Backend> host_only) {
  return stage_device_buffers(std::move(host_only), std::make_unique<DeviceMemoryCopier>());
}

std::unique_ptr<Backend> stage_device_buffers(std::unique_ptr<Backend> host_only,
                                              std::unique_ptr<StagingCopier> copier) {
  TESSERA_CHECK(host_only != nullptr, "stage_device_buffers: no backend given");
  TESSERA_CHECK(copier != nullptr, "stage_device_buffers: no staging copier given");
  return std::make_unique<DeviceStagedBackend>(std::move(host_only), std::move(copier));
}

StagingCopier* staging_copier(Backend& b) noexcept {
  auto* staged = dynamic_cast<DeviceStagedBackend*>(&b);
  return staged ? &staged->copier() : nullptr;
}

}  // namespace tessera::comm
