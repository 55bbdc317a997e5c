// TracingCompute and TracingComm: time each call, record it, pass it on unchanged.
#include "tessera/core/tracing.hpp"

#include <algorithm>

#include "tessera/compute/ops.hpp"
#include "tessera/core/error.hpp"

namespace tessera::core {

namespace {

std::string layer_of(const TraceTarget& t) { return t.scope ? t.scope->layer : std::string(); }
// The micro-batch running when the op was issued (nn::Scope::micro_batch), -1 outside one.
int micro_of(const TraceTarget& t) { return t.scope ? t.scope->micro_batch : -1; }

void memory_counter(const TraceTarget& t, double ts) {
  if (!t.allocator) return;
  const MemStats s = t.allocator->stats();
  TraceEvent c;
  c.ph = 'C';
  c.name = "memory";
  c.pid = t.rank;
  c.ts_us = ts;
  for (int i = 0; i < kNumMemCategories; ++i)
    c.counters.emplace_back(std::string(mem_category_name(static_cast<MemCategory>(i))), double(s.current[i]));
  t.recorder->add(std::move(c));
}

}  // namespace

TracingCompute::TracingCompute(compute::Backend& inner, TraceTarget target) : inner_(inner), target_(std::move(target)) {
  TESSERA_CHECK(target_.recorder != nullptr, "TracingCompute needs a TraceRecorder");
}

void TracingCompute::execute(const compute::OpCall& call) {
  const double t0 = target_.recorder->now_us();
  inner_.execute(call);
  const double t1 = target_.recorder->now_us();
  const compute::OpCost cost = compute::op_cost(call);
  TraceEvent e;
  e.name = std::string(compute::op_name(call.kind));
  e.cat = "compute";
  e.pid = target_.rank;
  e.tid = kLaneCompute;
  e.ts_us = t0;
  e.dur_us = t1 - t0;
  e.op = e.name;
  e.layer = layer_of(target_);
  e.micro = micro_of(target_);
  e.bytes = cost.bytes_read + cost.bytes_written;
  e.flops = cost.flops;
  e.coords = target_.coords;
  target_.recorder->add(std::move(e));
  memory_counter(target_, t1);
}

namespace {

// Records an operation's events when its data has moved (see TracingComm in tracing.hpp), and a
// "wait" event per lane for the time wait() blocked on it.
class TracedWork final : public comm::Work {
 public:
  // events: the operation's events, their ts_us the post's start. overlaps: the backend's data
  // moves between its calls; else the events end where the post returned, now.
  TracedWork(comm::WorkPtr inner, TraceTarget target, std::vector<TraceEvent> events, std::string op,
             bool overlaps)
      : inner_(std::move(inner)), target_(std::move(target)), events_(std::move(events)), op_(std::move(op)) {
    const double posted = target_.recorder->now_us();
    if (!inner_ || !overlaps || inner_->is_completed()) record(posted);
  }
  ~TracedWork() override {
    if (!events_.empty()) record(target_.recorder->now_us());
  }
  bool is_completed() override {
    const bool done = !inner_ || inner_->is_completed();
    if (done && !events_.empty()) record(target_.recorder->now_us());
    return done;
  }
  void wait() override {
    if (!inner_) return;
    if (waited_ || inner_->is_completed()) {
      if (!events_.empty()) record(target_.recorder->now_us());
      inner_->wait();  // a no-op after success; rethrows a failure
      waited_ = true;
      return;
    }
    const double w0 = target_.recorder->now_us();
    inner_->wait();
    const double w1 = target_.recorder->now_us();
    waited_ = true;
    if (!events_.empty()) record(w1);
    for (int lane : lanes_) {
      TraceEvent e;
      e.name = "wait";
      e.cat = "wait";
      e.op = op_;
      e.pid = target_.rank;
      e.tid = lane;
      e.ts_us = w0;
      e.dur_us = w1 - w0;
      e.layer = layer_;
      e.micro = micro_;
      e.coords = target_.coords;
      target_.recorder->add(std::move(e));
    }
  }

 private:
  // t1: when completion was first seen. A backend that knows when the data moved (Work::moved)
  // gives the bounds instead: the span is the transfer, not the post-to-observation interval.
  void record(double t1) noexcept {
    std::optional<comm::Moved> moved;
    if (inner_ && !events_.empty()) moved = inner_->moved();
    for (auto& e : events_) {
      if (moved) {
        e.ts_us = target_.recorder->us_at(moved->start);
        t1 = target_.recorder->us_at(moved->end);
      }
      e.dur_us = t1 - e.ts_us;
      layer_ = e.layer;
      micro_ = e.micro;
      if (std::find(lanes_.begin(), lanes_.end(), e.tid) == lanes_.end()) lanes_.push_back(e.tid);
      target_.recorder->add(std::move(e));
    }
    events_.clear();
  }
  comm::WorkPtr inner_;
  TraceTarget target_;
  std::vector<TraceEvent> events_;  // not yet recorded
  std::vector<int> lanes_;           // the recorded events' lanes, for the wait events
  std::string op_, layer_;
  int micro_ = -1;
  bool waited_ = false;
};

}  // namespace

TracingComm::TracingComm(std::unique_ptr<comm::Backend> owned, TraceTarget target,
                         std::vector<int> world_ranks)
    : ForwardingBackend(std::move(owned)),
      target_(std::move(target)),
      world_ranks_(std::move(world_ranks)) {
  init();
}

TracingComm::TracingComm(comm::Backend& inner, TraceTarget target)
    : ForwardingBackend(inner), target_(std::move(target)) {
  init();
}

void TracingComm::init() {
  TESSERA_CHECK(target_.recorder != nullptr, "TracingComm needs a TraceRecorder");
  sent_.assign(inner().size(), 0);
  received_.assign(inner().size(), 0);
  overlaps_ = inner().capabilities().overlaps_compute;
}

int TracingComm::world_rank(int group_rank) const {
  return world_ranks_.empty() ? group_rank : world_ranks_.at(group_rank);
}

comm::WorkPtr TracingComm::traced(const char* op, std::int64_t bytes, comm::WorkPtr w, double t0) {
  TraceEvent e;
  e.name = op;
  e.cat = "comm";
  e.pid = target_.rank;
  e.tid = kLaneComm;
  e.ts_us = t0;
  e.op = op;
  e.layer = layer_of(target_);
  e.micro = micro_of(target_);
  e.bytes = bytes;
  e.coords = target_.coords;
  std::vector<TraceEvent> events;
  events.push_back(std::move(e));
  return traced(std::move(w), op, std::move(events));
}

comm::WorkPtr TracingComm::traced(comm::WorkPtr w, const char* op, std::vector<TraceEvent> events) {
  return std::make_unique<TracedWork>(std::move(w), target_, std::move(events), op, overlaps_);
}

comm::WorkPtr TracingComm::all_reduce(comm::BufferView buf, comm::ReduceOp op) {
  const double t0 = target_.recorder->now_us();
  return traced("all_reduce", std::int64_t(buf.bytes()), inner().all_reduce(buf, op), t0);
}

comm::WorkPtr TracingComm::all_gather(comm::BufferView send, comm::BufferView recv) {
  const double t0 = target_.recorder->now_us();
  return traced("all_gather", std::int64_t(recv.bytes()), inner().all_gather(send, recv), t0);
}

comm::WorkPtr TracingComm::reduce_scatter(comm::BufferView send, comm::BufferView recv, comm::ReduceOp op) {
  const double t0 = target_.recorder->now_us();
  return traced("reduce_scatter", std::int64_t(send.bytes()),
                inner().reduce_scatter(send, recv, op), t0);
}

comm::WorkPtr TracingComm::broadcast(comm::BufferView buf, int root) {
  const double t0 = target_.recorder->now_us();
  return traced("broadcast", std::int64_t(buf.bytes()), inner().broadcast(buf, root), t0);
}

comm::WorkPtr TracingComm::all_to_all(comm::BufferView send, comm::BufferView recv) {
  const double t0 = target_.recorder->now_us();
  return traced("all_to_all", std::int64_t(send.bytes()), inner().all_to_all(send, recv), t0);
}

void TracingComm::barrier() {
  const double t0 = target_.recorder->now_us();
  inner().barrier();
  traced("barrier", 0, nullptr, t0)->wait();
}

comm::WorkPtr TracingComm::batch_p2p(const std::vector<comm::P2POp>& ops) {
  const double t0 = target_.recorder->now_us();
  std::vector<TraceEvent> events;
  for (const auto& o : ops) {
    const int peer = world_rank(o.peer);
    const bool send = o.kind == comm::P2POp::Kind::Send;
    TraceEvent e;
    e.name = send ? "send" : "recv";
    e.cat = "halo";
    e.pid = target_.rank;
    e.tid = kLaneHaloBase + peer;
    e.ts_us = t0;
    e.op = e.name;
    e.layer = layer_of(target_);
    e.micro = micro_of(target_);
    e.bytes = std::int64_t(o.buf.bytes());
    e.peer = peer;
    e.coords = target_.coords;
    const int src = send ? target_.rank : peer, dst = send ? peer : target_.rank;
    const std::int64_t seq = send ? sent_.at(o.peer)++ : received_.at(o.peer)++;
    e.flow_id = std::to_string(src) + "_" + std::to_string(dst) + "_" + std::to_string(seq);
    e.flow_out = send;
    e.flow_in = !send;
    events.push_back(std::move(e));
  }
  return traced(inner().batch_p2p(ops), "batch_p2p", std::move(events));
}

std::unique_ptr<comm::Backend> TracingComm::decorate_split(std::unique_ptr<comm::Backend> sub,
                                                           const std::vector<int>& ranks) {
  std::vector<int> wr;
  for (int r : ranks) wr.push_back(world_rank(r));
  return std::make_unique<TracingComm>(std::move(sub), target_, std::move(wr));
}

}  // namespace tessera::core
