// PluginBackend: forwards every Backend call to the plugin's C table; the host's Store is offered
// to the plugin as a C table too.
#include "plugin_backend.hpp"

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "tessera/comm/plugin_export.hpp"
#include "tessera/comm/recycled.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"

namespace tessera::comm {

namespace {

/// The host's Store as a C table (lives as long as the world backend and its sub-groups).
struct StoreBridge {
  std::shared_ptr<Rendezvous> rdzv;  // keeps the store alive
  Store* store = nullptr;
  tessera_store_v1_t table{};

  explicit StoreBridge(std::shared_ptr<Rendezvous> r) : rdzv(std::move(r)), store(rdzv->store()) {
    table.self = this;
    table.set = [](void* self, const char* key, const void* v, std::size_t n, tessera_error_t* err) {
      return plugin::guard(err, [&] { static_cast<StoreBridge*>(self)->store->set(key, std::string(static_cast<const char*>(v), n)); });
    };
    table.get = [](void* self, const char* key, std::int64_t timeout_ms, void** v, std::size_t* n, tessera_error_t* err) {
      return plugin::guard(err, [&] {
        const std::string s = static_cast<StoreBridge*>(self)->store->get(key, std::chrono::milliseconds(timeout_ms));
        *v = std::malloc(s.size() ? s.size() : 1);
        std::memcpy(*v, s.data(), s.size());
        *n = s.size();
      });
    };
    table.add = [](void* self, const char* key, std::int64_t d, std::int64_t* r, tessera_error_t* err) {
      return plugin::guard(err, [&] { *r = static_cast<StoreBridge*>(self)->store->add(key, d); });
    };
    table.abort = [](void* self, const char* reason) { static_cast<StoreBridge*>(self)->store->abort(reason); };
    table.abort_reason = [](void* self, char* buf, std::size_t len) {
      std::string r;
      try {
        r = static_cast<StoreBridge*>(self)->store->abort_reason();
      } catch (...) {
        r = "the store failed";
      }
      if (r.empty()) return 0;
      std::strncpy(buf, r.c_str(), len - 1);
      buf[len - 1] = '\0';
      return 1;
    };
    table.abort_fd = store->abort_fd();
  }
};

class PluginWork final : public Work, public Recycled<PluginWork> {
 public:
  // `keep` holds the library, so the table and its name outlive the work.
  PluginWork(std::shared_ptr<void> keep, const tessera_comm_plugin_v1_t* t,
             tessera_comm_plugin_v1_moved_fn moved, void* ctx, void* req)
      : keep_(std::move(keep)), t_(t), moved_(moved), ctx_(ctx), req_(req) {}
  ~PluginWork() override { t_->free_request(ctx_, req_); }
  bool is_completed() override {
    if (done_) return true;
    tessera_error_t err;  // filled only on failure (1 KiB: not zeroed per call)
    err.message[0] = '\0';
    int done = 0;
    const auto st = t_->test(ctx_, req_, &done, &err);
    if (st != TESSERA_OK) plugin::throw_status(st, t_->name, err.message);
    done_ = done != 0;
    return done_;
  }
  void wait() override {
    if (done_) return;
    tessera_error_t err;  // filled only on failure (1 KiB: not zeroed per call)
    err.message[0] = '\0';
    const auto st = t_->wait(ctx_, req_, &err);
    if (st != TESSERA_OK) plugin::throw_status(st, t_->name, err.message);
    done_ = true;
  }
  std::optional<Moved> moved() const override {
    std::int64_t a = 0, b = 0;
    if (!done_ || !moved_ || moved_(req_, &a, &b) != 1) return std::nullopt;
    using D = std::chrono::steady_clock::duration;
    return Moved{std::chrono::steady_clock::time_point(
                     std::chrono::duration_cast<D>(std::chrono::nanoseconds(a))),
                 std::chrono::steady_clock::time_point(
                     std::chrono::duration_cast<D>(std::chrono::nanoseconds(b)))};
  }

 private:
  std::shared_ptr<void> keep_;
  const tessera_comm_plugin_v1_t* t_;
  tessera_comm_plugin_v1_moved_fn moved_;  // optional
  void* ctx_;
  void* req_;
  bool done_ = false;
};

/// The device memories behind the device buffers of a call. Their data is written by work on the
/// compute backend's stream, which the plugin's stream does not see by itself. Host buffers and
/// device buffers of unknown memory (raw pointers: their caller orders them) add nothing.
using Devices = std::vector<core::DeviceMemory*>;
void add_device(Devices& ds, const BufferView& b) {
  if (b.space == MemorySpace::Host || b.device == nullptr) return;
  for (core::DeviceMemory* d : ds)
    if (d == b.device) return;
  ds.push_back(b.device);
}
Devices devices_of(const std::vector<P2POp>& ops) {
  Devices ds;
  for (const P2POp& o : ops) add_device(ds, o.buf);
  return ds;
}

/// Orders what the plugin is about to post after the work that produced its device buffers (and
/// after the compute work still reading the buffers it will write): ctx's stream waits for each
/// memory's work on the device (no host wait); where the plugin has no stream, or a memory cannot
/// order one, the host waits for that memory (DeviceMemory::synchronize). Called before every
/// post, never after: a request completes only once its outputs are in place, and the host's
/// compute comes after that.
void order_after_producers(const Devices& ds, tessera_comm_plugin_v1_stream_fn stream_of,
                           void* ctx) {
  if (ds.empty()) return;
  void* stream = stream_of ? stream_of(ctx) : nullptr;
  for (core::DeviceMemory* d : ds)
    if (!d->stream_waits_for_issued(stream)) d->synchronize();
}

tessera_buffer_t to_c(const BufferView& b) {
  return {b.data, b.count, static_cast<int>(b.dtype), b.space == MemorySpace::Cuda ? 1 : 0};
}

/// batch_p2p's operations as the C array (into `out`, kept by the caller between calls).
void to_c(const std::vector<P2POp>& ops, std::vector<tessera_p2p_op_t>& out) {
  out.resize(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i)
    out[i] = {ops[i].kind == P2POp::Kind::Recv ? 1 : 0, to_c(ops[i].buf), ops[i].peer, ops[i].tag};
}

class PluginBackend final : public Backend {
 public:
  PluginBackend(std::shared_ptr<void> lib, std::shared_ptr<StoreBridge> bridge,
                const tessera_comm_plugin_v1_t* t, PluginExtras extras, Capabilities caps,
                void* ctx, std::chrono::milliseconds timeout)
      : lib_(std::move(lib)),
        bridge_(std::move(bridge)),
        t_(t),
        extras_(extras),
        caps_(caps),
        ctx_(ctx),
        timeout_(timeout),
        name_(t->name),
        rank_(t->rank(ctx)),
        size_(t->size(ctx)) {}
  ~PluginBackend() override { t_->destroy(ctx_); }

  std::string_view name() const noexcept override { return name_; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  Capabilities capabilities() const noexcept override { return caps_; }
  std::chrono::milliseconds timeout() const noexcept override { return timeout_; }

  WorkPtr all_reduce(BufferView buf, ReduceOp op) override {
    order({buf});
    return start([&](void** req, tessera_error_t* e) { return t_->all_reduce(ctx_, to_c(buf), static_cast<int>(op), req, e); });
  }
  WorkPtr all_gather(BufferView s, BufferView r) override {
    order({s, r});
    return start([&](void** req, tessera_error_t* e) { return t_->all_gather(ctx_, to_c(s), to_c(r), req, e); });
  }
  WorkPtr reduce_scatter(BufferView s, BufferView r, ReduceOp op) override {
    order({s, r});
    return start([&](void** req, tessera_error_t* e) {
      return t_->reduce_scatter(ctx_, to_c(s), to_c(r), static_cast<int>(op), req, e);
    });
  }
  WorkPtr broadcast(BufferView buf, int root) override {
    order({buf});
    return start([&](void** req, tessera_error_t* e) { return t_->broadcast(ctx_, to_c(buf), root, req, e); });
  }
  WorkPtr all_to_all(BufferView s, BufferView r) override {
    if (!t_->all_to_all) return Backend::all_to_all(s, r);
    order({s, r});
    return start([&](void** req, tessera_error_t* e) { return t_->all_to_all(ctx_, to_c(s), to_c(r), req, e); });
  }
  WorkPtr batch_p2p(const std::vector<P2POp>& ops) override {
    to_c(ops, p2p_);  // kept between calls: a halo exchange allocates nothing here
    order_after_producers(devices_of(ops), extras_.stream, ctx_);
    return start([&](void** req, tessera_error_t* e) { return t_->batch_p2p(ctx_, p2p_.data(), p2p_.size(), req, e); });
  }
  void barrier() override {
    tessera_error_t err;  // filled only on failure (1 KiB: not zeroed per call)
    err.message[0] = '\0';
    const auto st = t_->barrier(ctx_, &err);
    if (st != TESSERA_OK) plugin::throw_status(st, name_, err.message);
  }
  std::unique_ptr<Backend> split(const std::vector<int>& ranks) override {
    if (!t_->split) return Backend::split(ranks);
    tessera_error_t err;  // filled only on failure (1 KiB: not zeroed per call)
    err.message[0] = '\0';
    void* sub = nullptr;
    const auto st = t_->split(ctx_, ranks.data(), ranks.size(), &sub, &err);
    if (st != TESSERA_OK) plugin::throw_status(st, name_, err.message);
    if (!sub) return nullptr;
    return std::make_unique<PluginBackend>(lib_, bridge_, t_, extras_, caps_, sub, timeout_);
  }

 private:
  template <class F>
  WorkPtr start(F&& f) {
    tessera_error_t err;  // filled only on failure (1 KiB: not zeroed per call)
    err.message[0] = '\0';
    void* req = nullptr;
    const auto st = f(&req, &err);
    if (st != TESSERA_OK) plugin::throw_status(st, name_, err.message);
    return std::make_unique<PluginWork>(lib_, t_, extras_.moved, ctx_, req);
  }
  /// order_after_producers for the buffers of one collective.
  void order(std::initializer_list<BufferView> bufs) {
    Devices ds;
    for (const BufferView& b : bufs) add_device(ds, b);
    order_after_producers(ds, extras_.stream, ctx_);
  }

  std::shared_ptr<void> lib_;
  std::shared_ptr<StoreBridge> bridge_;
  const tessera_comm_plugin_v1_t* t_;
  PluginExtras extras_;  // optional symbols
  Capabilities caps_;
  void* ctx_;
  std::chrono::milliseconds timeout_;
  std::string name_;
  int rank_, size_;
  std::vector<tessera_p2p_op_t> p2p_;  // batch_p2p's C array, reused
};

}  // namespace

std::unique_ptr<Backend> make_plugin_backend(std::shared_ptr<void> lib,
                                             const tessera_comm_plugin_v1_t* table,
                                             PluginExtras extras, Capabilities caps,
                                             const BackendOptions& options) {
  TESSERA_CHECK(options.rendezvous && options.rendezvous->store(), "comm backend '", table->name,
                "' needs a rendezvous with a key-value store (env://, e.g. through tessera launch); got ",
                options.rendezvous ? "'" + options.rendezvous->describe() + "'" : "none");
  auto bridge = std::make_shared<StoreBridge>(options.rendezvous);
  tessera_init_v1_t init{};
  init.rank = options.rank;
  init.size = options.size;
  init.timeout_ms = options.timeout.count();
  init.store = &bridge->table;
  // Levels 0 (error) and 1 (warn) are warnings to the reader; 2 (info) and 3 (debug) notices.
  init.log = [](int level, const char* m) {
    core::report(level <= 1 ? core::ReportLevel::Warning : core::ReportLevel::Info, m ? m : "");
  };
  void* ctx = nullptr;
  tessera_error_t err;  // filled only on failure (1 KiB: not zeroed per call)
    err.message[0] = '\0';
  const auto st = table->create(&init, &ctx, &err);
  if (st != TESSERA_OK) plugin::throw_status(st, table->name, err.message);
  return std::make_unique<PluginBackend>(std::move(lib), std::move(bridge), table, extras, caps,
                                         ctx, options.timeout);
}

}  // namespace tessera::comm
