// Test plugins "streamtest" and "streamhost" (tests/comm/stream_order_test.cpp): one rank whose
// operations move their buffers — host memory or the emulated device's (host blocks) — with
// memmove. "streamtest" moves them on an EmulatedStream that it exports as
// tessera_comm_plugin_v1_stream and that runs when a request is waited for or tested, as NCCL's
// kernels run on its CUDA stream (and the ucx plugin's staging copies on its staging stream);
// "streamhost" (built with STREAM_PLUGIN_HOST) moves them inside its calls and exports no stream,
// as a host-memory plugin does.
#include <cstring>
#include <memory>
#include <vector>

#include "support/emulated_stream.hpp"
#include "tessera/comm/plugin_export.hpp"

namespace {

using namespace tessera;

#ifdef STREAM_PLUGIN_HOST
constexpr bool kOnStream = false;
constexpr const char* kName = "streamhost";
#else
constexpr bool kOnStream = true;
constexpr const char* kName = "streamtest";
#endif

/// Done once the stream has run (the device caught up with everything enqueued).
class StreamWork final : public comm::Work {
 public:
  explicit StreamWork(test::EmulatedStream& s) : stream_(s) {}
  bool is_completed() override {
    stream_.run();
    return true;
  }
  void wait() override { stream_.run(); }

 private:
  test::EmulatedStream& stream_;
};

comm::Capabilities caps() {
  comm::Capabilities c{/*cuda_memory=*/true, /*all_to_all=*/false, /*split=*/true,
                       /*multi_process=*/false};
  c.overlaps_compute = kOnStream;
  return c;
}

class StreamBackend final : public comm::Backend {
 public:
  explicit StreamBackend(std::chrono::milliseconds t) : timeout_(t) {}
  std::string_view name() const noexcept override { return kName; }
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  comm::Capabilities capabilities() const noexcept override { return caps(); }
  std::chrono::milliseconds timeout() const noexcept override { return timeout_; }

  comm::WorkPtr all_reduce(comm::BufferView, comm::ReduceOp) override {
    return transfer({});
  }  // one rank
  comm::WorkPtr all_gather(comm::BufferView s, comm::BufferView r) override {
    TESSERA_CHECK(s.count == r.count && s.dtype == r.dtype, kName, ": all_gather: recv has ",
                  r.count, " elements, expected ", s.count);
    return transfer({{r.data, s.data, s.bytes()}});
  }
  comm::WorkPtr reduce_scatter(comm::BufferView s, comm::BufferView r, comm::ReduceOp) override {
    return all_gather(s, r);
  }
  comm::WorkPtr broadcast(comm::BufferView, int root) override {
    TESSERA_CHECK(root == 0, kName, ": broadcast root ", root, " outside this group of 1 rank");
    return transfer({});
  }
  /// Each receive gets the first unmatched send of its tag (the only peer is this rank).
  comm::WorkPtr batch_p2p(const std::vector<comm::P2POp>& ops) override {
    std::vector<bool> used(ops.size(), false);
    std::vector<Copy> copies;
    for (const comm::P2POp& r : ops) {
      TESSERA_CHECK(r.peer == 0, kName, ": batch_p2p with rank ", r.peer,
                    " outside this group of 1 rank");
      if (r.kind != comm::P2POp::Kind::Recv) continue;
      bool matched = false;
      for (std::size_t i = 0; i < ops.size() && !matched; ++i) {
        const comm::P2POp& s = ops[i];
        if (used[i] || s.kind != comm::P2POp::Kind::Send || s.tag != r.tag) continue;
        TESSERA_CHECK(s.buf.bytes() == r.buf.bytes(), kName, ": batch_p2p tag ", r.tag,
                      ": send of ", s.buf.bytes(), " bytes to a receive of ", r.buf.bytes());
        used[i] = matched = true;
        copies.push_back({r.buf.data, s.buf.data, r.buf.bytes()});
      }
      TESSERA_CHECK(matched, kName, ": batch_p2p: a receive of tag ", r.tag, " has no send");
    }
    return transfer(std::move(copies));
  }
  void barrier() override {}
  std::unique_ptr<comm::Backend> split(const std::vector<int>& ranks) override {
    if (ranks.empty()) return nullptr;
    return std::make_unique<StreamBackend>(timeout_);
  }

  test::EmulatedStream stream;  ///< streamtest's: where its operations move their buffers

 private:
  struct Copy {
    void* dst;
    const void* src;
    std::size_t bytes;
  };
  comm::WorkPtr transfer(std::vector<Copy> copies) {
    if (!kOnStream) {
      for (const Copy& c : copies) std::memmove(c.dst, c.src, c.bytes);
      return std::make_unique<comm::CompletedWork>();
    }
    for (const Copy& c : copies) stream.enqueue([c] { std::memmove(c.dst, c.src, c.bytes); });
    return std::make_unique<StreamWork>(stream);
  }

  std::chrono::milliseconds timeout_;
};

std::unique_ptr<comm::Backend> create(const comm::BackendOptions& o) {
  TESSERA_CHECK(o.size == 1, kName, ": only one rank, not ", o.size);
  return std::make_unique<StreamBackend>(o.timeout);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const tessera_comm_plugin_v1_t*
tessera_comm_plugin_v1(void) {
  static const auto t = comm::plugin::make_table<&create>(
      kName,
      kOnStream ? "one rank moving buffers on a stream, for tests"
                : "one rank moving buffers in its calls, for tests",
      caps());
  return &t;
}

#ifndef STREAM_PLUGIN_HOST
// The stream the host orders after the producers of device buffers (plugin_v1.h).
extern "C" __attribute__((visibility("default"))) void* tessera_comm_plugin_v1_stream(void* ctx) {
  auto* b = dynamic_cast<StreamBackend*>(&comm::plugin::backend_of(ctx));
  return b ? &b->stream : nullptr;
}
#endif
