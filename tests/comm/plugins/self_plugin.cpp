// Test plugin "selftest": a one-rank backend exported through plugin_export.hpp, to exercise the
// loader, the C ABI both ways and the mapping of errors to status codes and back.
#include <cstring>

#include "tessera/comm/plugin_export.hpp"

namespace {

using namespace tessera;

class SelfBackend final : public comm::Backend {
 public:
  explicit SelfBackend(std::chrono::milliseconds t) : timeout_(t) {}
  std::string_view name() const noexcept override { return "selftest"; }
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  comm::Capabilities capabilities() const noexcept override { return {false, false, true, false}; }
  std::chrono::milliseconds timeout() const noexcept override { return timeout_; }
  comm::WorkPtr all_reduce(comm::BufferView, comm::ReduceOp) override { return done(); }
  comm::WorkPtr all_gather(comm::BufferView s, comm::BufferView r) override {
    TESSERA_CHECK(s.count == r.count, "selftest: all_gather: recv has ", r.count, " elements, expected ", s.count);
    if (s.data != r.data) std::memcpy(r.data, s.data, s.bytes());
    return done();
  }
  comm::WorkPtr reduce_scatter(comm::BufferView s, comm::BufferView r, comm::ReduceOp) override {
    return all_gather(s, r);
  }
  comm::WorkPtr broadcast(comm::BufferView, int root) override {
    TESSERA_CHECK(root == 0, "selftest: broadcast root ", root, " outside this group of 1 rank");
    return done();
  }
  comm::WorkPtr batch_p2p(const std::vector<comm::P2POp>&) override {
    throw TimeoutError("selftest", "rank 0: batch_p2p timed out (a test of the status mapping)");
  }
  void barrier() override {}
  std::unique_ptr<comm::Backend> split(const std::vector<int>& ranks) override {
    if (ranks.empty()) return nullptr;
    return std::make_unique<SelfBackend>(timeout_);
  }

 private:
  static comm::WorkPtr done() { return std::make_unique<comm::CompletedWork>(); }
  std::chrono::milliseconds timeout_;
};

std::unique_ptr<comm::Backend> create(const comm::BackendOptions& o) {
  TESSERA_CHECK(o.size == 1, "selftest: only one rank, not ", o.size);
  return std::make_unique<SelfBackend>(o.timeout);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const tessera_comm_plugin_v1_t* tessera_comm_plugin_v1(void) {
  static const auto t = comm::plugin::make_table<&create>("selftest", "one rank, for tests",
                                                           comm::Capabilities{false, false, true, false});
  return &t;
}

// The retired symbol of prepared batches (plugin_v1.h), as a plugin built before their removal
// exports it: the loader no longer looks it up, so this plugin loads although the table is NULL
// (which the loader used to refuse).
extern "C" __attribute__((visibility("default"))) const void* tessera_comm_plugin_v1_plans(void) {
  return nullptr;
}
