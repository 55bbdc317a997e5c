// For plugin authors writing in C++: turns a comm::Backend factory into the C plugin table
// (plugin_v1.h). Exceptions become status codes plus a message; nothing crosses the ABI as C++.
//   extern "C" const tessera_comm_plugin_v1_t* tessera_comm_plugin_v1(void) {
//     static const auto table = tessera::comm::plugin::make_table<&create>("ucx", "...", caps);
//     return &table;
//   }
#pragma once

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tessera/comm/backend.hpp"
#include "tessera/comm/plugin_v1.h"
#include "tessera/comm/store.hpp"
#include "tessera/core/error.hpp"

namespace tessera::comm::plugin {

inline void write_error(tessera_error_t* err, const std::string& m) {
  if (!err) return;
  std::strncpy(err->message, m.c_str(), sizeof err->message - 1);
  err->message[sizeof err->message - 1] = '\0';
}

/// Runs f, mapping tessera's exceptions to status codes.
template <class F>
tessera_status_t guard(tessera_error_t* err, F&& f) noexcept {
  try {
    f();
    return TESSERA_OK;
  } catch (const TimeoutError& e) {
    write_error(err, e.what());
    return TESSERA_ERR_TIMEOUT;
  } catch (const InvalidArgument& e) {
    write_error(err, e.what());
    return TESSERA_ERR_INVALID;
  } catch (const Unsupported& e) {
    write_error(err, e.what());
    return TESSERA_ERR_UNSUPPORTED;
  } catch (const InternalError& e) {
    write_error(err, e.what());
    return TESSERA_ERR_INTERNAL;
  } catch (const BackendError& e) {
    write_error(err, e.what());
    return e.code() == 125 ? TESSERA_ERR_REMOTE : TESSERA_ERR_SYSTEM;
  } catch (const std::exception& e) {
    write_error(err, e.what());
    return TESSERA_ERR_INTERNAL;
  } catch (...) {
    write_error(err, "unknown exception");
    return TESSERA_ERR_INTERNAL;
  }
}

/// Throws the exception a status code stands for (used on both sides of the ABI).
[[noreturn]] inline void throw_status(tessera_status_t st, const std::string& backend, const char* msg) {
  const std::string m = msg;
  switch (st) {
    case TESSERA_ERR_TIMEOUT: {
      // The message already starts with "<backend>: "; keep it as is.
      const std::string prefix = backend + ": ";
      throw TimeoutError(backend, m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m);
    }
    case TESSERA_ERR_INVALID: throw InvalidArgument(m);
    case TESSERA_ERR_UNSUPPORTED: throw Unsupported(m);
    case TESSERA_ERR_INTERNAL: throw InternalError(m);
    case TESSERA_ERR_REMOTE:
    case TESSERA_ERR_SYSTEM:
    default: {
      const std::string prefix = backend + ": ";
      throw BackendError(backend, st == TESSERA_ERR_REMOTE ? 125 : 5,
                         m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m);
    }
  }
}

/// The host's store seen through the C table.
class CStore final : public Store {
 public:
  explicit CStore(const tessera_store_v1_t* s) : s_(s) {}
  void set(const std::string& key, const std::string& value) override {
    tessera_error_t err{};
    const auto st = s_->set(s_->self, key.c_str(), value.data(), value.size(), &err);
    if (st != TESSERA_OK) throw_status(st, "store", err.message);
  }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    tessera_error_t err{};
    void* v = nullptr;
    std::size_t n = 0;
    const auto st = s_->get(s_->self, key.c_str(), timeout.count(), &v, &n, &err);
    if (st != TESSERA_OK) throw_status(st, "store", err.message);
    std::string out(static_cast<const char*>(v), n);
    std::free(v);
    return out;
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    tessera_error_t err{};
    std::int64_t r = 0;
    const auto st = s_->add(s_->self, key.c_str(), delta, &r, &err);
    if (st != TESSERA_OK) throw_status(st, "store", err.message);
    return r;
  }
  bool check(const std::string& key) override {
    try {
      get(key, std::chrono::milliseconds(0));
      return true;
    } catch (const TimeoutError&) {
      return false;
    }
  }
  void abort(const std::string& reason) noexcept override { s_->abort(s_->self, reason.c_str()); }
  std::string abort_reason() override {
    char buf[1024];
    return s_->abort_reason(s_->self, buf, sizeof buf) ? std::string(buf) : std::string();
  }
  int abort_fd() override { return s_->abort_fd; }

 private:
  const tessera_store_v1_t* s_;
};

/// A Rendezvous carrying the host's store into the plugin.
class CRendezvous final : public Rendezvous {
 public:
  explicit CRendezvous(const tessera_store_v1_t* s) : store_(s) {}
  std::string describe() const override { return "the host's store (plugin ABI v1)"; }
  Store* store() override { return &store_; }

 private:
  CStore store_;
};

struct Ctx {
  std::unique_ptr<Backend> backend;
  std::shared_ptr<CRendezvous> rdzv;  // shared by a group and its sub-groups
  std::vector<P2POp> p2p;             // batch_p2p's operations, reused (one thread per ctx)
};

// tessera_dtype_t is core::DType's numbering: a buffer's dtype crosses the ABI as that number,
// bf16 and f16 (raw 16-bit patterns) included, in both directions (to_view here, to_c in
// plugin_backend.cpp), with no conversion.
static_assert(TESSERA_F32 == static_cast<int>(core::DType::F32) &&
              TESSERA_F64 == static_cast<int>(core::DType::F64) &&
              TESSERA_BF16 == static_cast<int>(core::DType::BF16) &&
              TESSERA_F16 == static_cast<int>(core::DType::F16) &&
              TESSERA_I32 == static_cast<int>(core::DType::I32) &&
              TESSERA_I64 == static_cast<int>(core::DType::I64));

inline BufferView to_view(const tessera_buffer_t& b) {
  return {b.data, b.count, static_cast<core::DType>(b.dtype), b.space ? MemorySpace::Cuda : MemorySpace::Host};
}

/// Capabilities to and from the C table (cuda_memory 2 = staged through host memory).
inline tessera_capabilities_t caps_to_c(const Capabilities& c) {
  return {c.cuda_memory ? (c.cuda_staged ? 2 : 1) : 0, c.all_to_all, c.split, c.multi_process};
}
inline Capabilities caps_from_c(const tessera_capabilities_t& c) {
  Capabilities r{c.cuda_memory != 0, c.all_to_all != 0, c.split != 0, c.multi_process != 0};
  r.cuda_staged = c.cuda_memory == 2;
  return r;
}

/// batch_p2p's C operations as P2POps, in the ctx's reused vector.
inline const std::vector<P2POp>& to_ops(void* ctx, const tessera_p2p_op_t* ops, std::size_t n) {
  std::vector<P2POp>& v = static_cast<Ctx*>(ctx)->p2p;
  v.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = {ops[i].kind ? P2POp::Kind::Recv : P2POp::Kind::Send, to_view(ops[i].buf), ops[i].peer, ops[i].tag};
  return v;
}

using Factory = std::unique_ptr<Backend> (*)(const BackendOptions&);

/// The table for a backend made by `Create` (a function template argument, so the table's
/// functions can be plain captureless lambdas).
template <Factory Create>
tessera_comm_plugin_v1_t make_table(const char* name, const char* description, Capabilities caps) {
  tessera_comm_plugin_v1_t t{};
  t.api_version = TESSERA_COMM_PLUGIN_API_V1;
  t.name = name;
  t.description = description;
  t.caps = caps_to_c(caps);
  t.create = [](const tessera_init_v1_t* init, void** ctx, tessera_error_t* err) {
    return guard(err, [&] {
      auto c = std::make_unique<Ctx>();
      c->rdzv = std::make_shared<CRendezvous>(init->store);
      BackendOptions o;
      o.rank = init->rank;
      o.size = init->size;
      o.timeout = std::chrono::milliseconds(init->timeout_ms);
      o.rendezvous = c->rdzv;
      c->backend = Create(o);
      *ctx = c.release();
    });
  };
  t.destroy = [](void* ctx) { delete static_cast<Ctx*>(ctx); };
  t.all_reduce = [](void* ctx, tessera_buffer_t buf, int op, void** req, tessera_error_t* err) {
    return guard(err, [&] {
      *req = static_cast<Ctx*>(ctx)->backend->all_reduce(to_view(buf), static_cast<ReduceOp>(op)).release();
    });
  };
  t.all_gather = [](void* ctx, tessera_buffer_t s, tessera_buffer_t r, void** req, tessera_error_t* err) {
    return guard(err, [&] { *req = static_cast<Ctx*>(ctx)->backend->all_gather(to_view(s), to_view(r)).release(); });
  };
  t.reduce_scatter = [](void* ctx, tessera_buffer_t s, tessera_buffer_t r, int op, void** req,
                        tessera_error_t* err) {
    return guard(err, [&] {
      *req = static_cast<Ctx*>(ctx)
                 ->backend->reduce_scatter(to_view(s), to_view(r), static_cast<ReduceOp>(op))
                 .release();
    });
  };
  t.broadcast = [](void* ctx, tessera_buffer_t buf, int root, void** req, tessera_error_t* err) {
    return guard(err, [&] { *req = static_cast<Ctx*>(ctx)->backend->broadcast(to_view(buf), root).release(); });
  };
  t.all_to_all = [](void* ctx, tessera_buffer_t s, tessera_buffer_t r, void** req, tessera_error_t* err) {
    return guard(err, [&] { *req = static_cast<Ctx*>(ctx)->backend->all_to_all(to_view(s), to_view(r)).release(); });
  };
  t.batch_p2p = [](void* ctx, const tessera_p2p_op_t* ops, std::size_t n, void** req, tessera_error_t* err) {
    return guard(err, [&] { *req = static_cast<Ctx*>(ctx)->backend->batch_p2p(to_ops(ctx, ops, n)).release(); });
  };
  t.barrier = [](void* ctx, tessera_error_t* err) {
    return guard(err, [&] { static_cast<Ctx*>(ctx)->backend->barrier(); });
  };
  t.split = [](void* ctx, const int* ranks, std::size_t n, void** sub, tessera_error_t* err) {
    return guard(err, [&] {
      auto* c = static_cast<Ctx*>(ctx);
      auto b = c->backend->split(std::vector<int>(ranks, ranks + n));
      *sub = nullptr;
      if (b) *sub = new Ctx{std::move(b), c->rdzv, {}};
    });
  };
  t.test = [](void*, void* req, int* done, tessera_error_t* err) {
    return guard(err, [&] { *done = static_cast<Work*>(req)->is_completed() ? 1 : 0; });
  };
  t.wait = [](void*, void* req, tessera_error_t* err) {
    return guard(err, [&] { static_cast<Work*>(req)->wait(); });
  };
  t.free_request = [](void*, void* req) { delete static_cast<Work*>(req); };
  t.rank = [](void* ctx) { return static_cast<Ctx*>(ctx)->backend->rank(); };
  t.size = [](void* ctx) { return static_cast<Ctx*>(ctx)->backend->size(); };
  return t;
}

/// The Backend behind a ctx of make_table (for the optional symbols that ask a ctx something,
/// e.g. TESSERA_COMM_PLUGIN_V1_STREAM_SYMBOL: `return my_stream(plugin::backend_of(ctx));`).
inline Backend& backend_of(void* ctx) noexcept { return *static_cast<Ctx*>(ctx)->backend; }

/// The optional transfer-time query (TESSERA_COMM_PLUGIN_V1_MOVED_SYMBOL) over the requests of
/// make_table: a request is a Work*, and Work::moved says when its data moved.
inline int request_moved(void* req, std::int64_t* start_ns, std::int64_t* end_ns) noexcept {
  const std::optional<Moved> m = static_cast<const Work*>(req)->moved();
  if (!m) return 0;
  *start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(m->start.time_since_epoch()).count();
  *end_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(m->end.time_since_epoch()).count();
  return 1;
}

}  // namespace tessera::comm::plugin
