// ForwardingBackend (tessera/comm/forwarding.hpp): a decorator that overrides batch_p2p alone
// sees every batch, its sub-groups' too, and passes the rest on unchanged.
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <vector>

#include "support/catch.hpp"
#include "tessera/comm/forwarding.hpp"
#include "tessera/comm/local.hpp"

namespace {

using namespace tessera;
using namespace std::chrono_literals;

/// Counts the batch_p2p calls that reach it, and nothing else.
class CountingBatches final : public comm::ForwardingBackend {
 public:
  CountingBatches(comm::Backend& inner, std::shared_ptr<std::atomic<int>> batches)
      : ForwardingBackend(inner), batches_(std::move(batches)) {}
  CountingBatches(std::unique_ptr<comm::Backend> owned, std::shared_ptr<std::atomic<int>> batches)
      : ForwardingBackend(std::move(owned)), batches_(std::move(batches)) {}
  comm::WorkPtr batch_p2p(const std::vector<comm::P2POp>& ops) override {
    ++*batches_;
    return inner().batch_p2p(ops);
  }

 protected:
  std::unique_ptr<comm::Backend> decorate_split(std::unique_ptr<comm::Backend> sub,
                                                const std::vector<int>&) override {
    return std::make_unique<CountingBatches>(std::move(sub), batches_);
  }

 private:
  std::shared_ptr<std::atomic<int>> batches_;
};

/// A ring exchange of one float: send to the next rank, receive from the previous one.
std::vector<comm::P2POp> ring(comm::Backend& b, float* out, float* in) {
  const int next = (b.rank() + 1) % b.size(), prev = (b.rank() + b.size() - 1) % b.size();
  return {{comm::P2POp::Kind::Send, {out, 1, core::DType::F32}, next, 3},
          {comm::P2POp::Kind::Recv, {in, 1, core::DType::F32}, prev, 3}};
}

/// Catch's assertions are not thread-safe: a rank throws, and local::run rethrows it.
void expect(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(what);
}

}  // namespace

TEST_CASE("a forwarding decorator sees every batch and its sub-groups' batches",
          "[local][forwarding]") {
  auto batches = std::make_shared<std::atomic<int>>(0);
  comm::local::run(
      2,
      [&](comm::Backend& world) {
        CountingBatches b(world, batches);
        expect(b.name() == world.name(), "the decorator has the wrapped backend's name");
        expect(b.size() == 2, "the decorator has the wrapped backend's size");
        float out = 0, in = -1;
        const std::vector<comm::P2POp> ops = ring(b, &out, &in);
        for (int run = 1; run <= 3; ++run) {
          out = static_cast<float>(10 * run + b.rank());
          b.batch_p2p(ops)->wait();
          expect(in == static_cast<float>(10 * run + (1 - b.rank())),
                 "the batch delivered the other rank's value");
        }
        std::unique_ptr<comm::Backend> sub = b.split({0, 1});
        expect(dynamic_cast<CountingBatches*>(sub.get()) != nullptr,
               "the sub-group is decorated (decorate_split)");
        out = 7;
        sub->batch_p2p(ring(*sub, &out, &in))->wait();
        expect(in == 7, "the sub-group's batch delivered the value");
      },
      10s);
  REQUIRE(batches->load() == 2 * (3 + 1));  // per rank: three batches and one sub-group batch
}
