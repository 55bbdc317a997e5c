// TracingComm's events tell when data moved (core/tracing.hpp): where the backend reports it
// (Work::moved: local's collectives, moved by the last rank to post, and its batches, whose
// messages arrive at their senders' posts) the event spans exactly that; for a backend that
// progresses while the caller computes and does not report it, the event runs from the post until
// its completion was first seen. The time wait() blocks is a separate "wait" event.
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "support/catch.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/core/tracing.hpp"

namespace {

using namespace tessera;
using namespace std::chrono_literals;

std::vector<core::TraceEvent> of_cat(const core::TraceRecorder& rec, int pid, const std::string& cat) {
  std::vector<core::TraceEvent> out;
  for (const core::TraceEvent& e : rec.events())
    if (e.pid == pid && e.cat == cat) out.push_back(e);
  return out;
}

/// A one-rank backend whose operations complete when the test says so, and that declares
/// overlaps_compute: what a stream-ordered backend (nccl) looks like to the tracer.
class ReleasedComm final : public comm::Backend {
 public:
  std::atomic<bool> released{false};
  std::string_view name() const noexcept override { return "released"; }
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  comm::Capabilities capabilities() const noexcept override {
    comm::Capabilities c;
    c.overlaps_compute = true;
    return c;
  }
  std::chrono::milliseconds timeout() const noexcept override { return 10s; }
  comm::WorkPtr all_reduce(comm::BufferView, comm::ReduceOp) override { return work(); }
  comm::WorkPtr all_gather(comm::BufferView, comm::BufferView) override { return work(); }
  comm::WorkPtr reduce_scatter(comm::BufferView, comm::BufferView, comm::ReduceOp) override { return work(); }
  comm::WorkPtr broadcast(comm::BufferView, int) override { return work(); }
  comm::WorkPtr batch_p2p(const std::vector<comm::P2POp>&) override { return work(); }
  void barrier() override {}

 private:
  class Released final : public comm::Work {
   public:
    explicit Released(const std::atomic<bool>& r) : r_(r) {}
    bool is_completed() override { return r_.load(); }
    void wait() override {
      while (!r_.load()) std::this_thread::sleep_for(100us);
    }

   private:
    const std::atomic<bool>& r_;
  };
  comm::WorkPtr work() { return std::make_unique<Released>(released); }
};

TEST_CASE("tracing: a local collective is drawn over the last rank's post where its data moved",
          "[core][trace]") {
  core::TraceRecorder rec;
  double late_post = 0, late_post_end = 0, early_wait = 0;
  comm::local::run(
      2,
      [&](comm::Backend& b) {
        core::TracingComm traced(b, core::TraceTarget{&rec, b.rank()});
        std::vector<float> v(1024, 1.0f);
        if (b.rank() == 1) {  // the last to post: the data moves in this post
          std::this_thread::sleep_for(20ms);
          late_post = rec.now_us();
        }
        comm::WorkPtr w = traced.all_reduce({v.data(), v.size(), core::DType::F32}, comm::ReduceOp::Sum);
        if (b.rank() == 1) late_post_end = rec.now_us();
        if (b.rank() == 0) {
          std::this_thread::sleep_for(60ms);  // "compute" while rank 1 arrives and moves the data
          early_wait = rec.now_us();
        }
        w->wait();
        REQUIRE(v[0] == 2.0f);
      },
      10s);
  for (int r = 0; r < 2; ++r) {
    const auto comm_events = of_cat(rec, r, "comm");
    REQUIRE(comm_events.size() == 1);
    const core::TraceEvent& e = comm_events[0];
    CHECK(e.name == "all_reduce");
    // Rank 0 posted 20 ms earlier, but its event is the transfer, inside rank 1's post.
    CHECK(e.ts_us >= late_post);
    CHECK(e.ts_us + e.dur_us <= late_post_end);
    CHECK(e.ts_us + e.dur_us <= early_wait);
    // Both found the all-reduce complete when they called wait(): nothing was waited for.
    CHECK(of_cat(rec, r, "wait").empty());
  }
}

TEST_CASE("tracing: a batch whose receive is late shows the blocking as a wait event on the peer's lane",
          "[core][trace]") {
  core::TraceRecorder rec;
  std::atomic<bool> rank0_posted{false};
  double rank0_post_end = 0, rank1_post = 0;
  comm::local::run(
      2,
      [&](comm::Backend& b) {
        core::TracingComm traced(b, core::TraceTarget{&rec, b.rank()});
        const int peer = 1 - b.rank();
        std::vector<float> send(256, float(b.rank() + 1)), recv(256, 0.0f);
        if (b.rank() == 1) {  // posts only after rank 0 is already waiting
          while (!rank0_posted.load()) std::this_thread::sleep_for(100us);
          std::this_thread::sleep_for(30ms);
          rank1_post = rec.now_us();
        }
        comm::WorkPtr w = traced.batch_p2p(
            {{comm::P2POp::Kind::Send, {send.data(), send.size(), core::DType::F32}, peer, 0},
             {comm::P2POp::Kind::Recv, {recv.data(), recv.size(), core::DType::F32}, peer, 0}});
        if (b.rank() == 0) {
          rank0_post_end = rec.now_us();
          rank0_posted = true;
        }
        w->wait();
        REQUIRE(recv[0] == float(peer + 1));
      },
      10s);
  const auto halo = of_cat(rec, 0, "halo");
  REQUIRE(halo.size() == 2);
  for (const core::TraceEvent& e : halo) {
    CHECK(e.tid == core::kLaneHaloBase + 1);
    // From the post (the send left, the receive was posted) until the peer's message was in.
    CHECK(e.ts_us <= rank0_post_end);
    CHECK(e.ts_us + e.dur_us >= rank1_post);
  }
  const auto waits = of_cat(rec, 0, "wait");
  REQUIRE(waits.size() == 1);  // one per lane of the batch
  const core::TraceEvent& w = waits[0];
  CHECK(w.name == "wait");
  CHECK(w.op == "batch_p2p");
  CHECK(w.tid == core::kLaneHaloBase + 1);
  CHECK(w.ts_us >= rank0_post_end);
  CHECK(w.ts_us + w.dur_us >= rank1_post);  // it lasted until the peer's send was posted
}

TEST_CASE("tracing: an operation of a backend that overlaps compute is drawn until its completion is seen",
          "[core][trace]") {
  core::TraceRecorder rec;
  ReleasedComm inner;
  core::TracingComm traced(inner, core::TraceTarget{&rec, 0});
  std::vector<float> v(8, 1.0f);

  SECTION("completion seen by is_completed: no wait event") {
    comm::WorkPtr w = traced.all_reduce({v.data(), v.size(), core::DType::F32}, comm::ReduceOp::Sum);
    CHECK(!w->is_completed());
    CHECK(of_cat(rec, 0, "comm").empty());  // still in flight: not drawn yet
    std::this_thread::sleep_for(5ms);
    const double released_at = rec.now_us();
    inner.released = true;
    CHECK(w->is_completed());
    const auto events = of_cat(rec, 0, "comm");
    REQUIRE(events.size() == 1);
    CHECK(events[0].ts_us + events[0].dur_us >= released_at);
    w->wait();
    CHECK(of_cat(rec, 0, "wait").empty());
    CHECK(of_cat(rec, 0, "comm").size() == 1);  // drawn once
  }
  SECTION("completion seen at the end of wait: the event and a wait event end there") {
    comm::WorkPtr w = traced.all_reduce({v.data(), v.size(), core::DType::F32}, comm::ReduceOp::Sum);
    std::thread releaser([&] {
      std::this_thread::sleep_for(10ms);
      inner.released = true;
    });
    w->wait();
    releaser.join();
    const auto events = of_cat(rec, 0, "comm");
    const auto waits = of_cat(rec, 0, "wait");
    REQUIRE(events.size() == 1);
    REQUIRE(waits.size() == 1);
    CHECK(waits[0].op == "all_reduce");
    CHECK(waits[0].tid == core::kLaneComm);
    CHECK(waits[0].ts_us >= events[0].ts_us);
    // The same instant, stored as start + duration in each: equal up to the rounding of those
    // two sums (a few ulps of a timestamp).
    const double end = events[0].ts_us + events[0].dur_us, wait_end = waits[0].ts_us + waits[0].dur_us;
    CHECK(std::abs(end - wait_end) <= 4 * std::numeric_limits<double>::epsilon() * std::abs(end));
  }
}

}  // namespace
