// FlowNetwork: flows routed over the topology, max-min fair rates by progressive filling,
// recomputed per connected component of the flows that changed; integer picosecond events.
#include "tessera/sim/network.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "tessera/core/error.hpp"

namespace tessera::sim {

namespace {
constexpr double kPsPerSecond = 1e12;
}  // namespace

Picos transfer_time_ps(double bytes, double rate) {
  if (bytes <= 0) return 0;
  const double x = bytes * kPsPerSecond / rate;
  TESSERA_ASSERT(x < 9e18, "transfer of ", bytes, " bytes at ", rate, " bytes/s overflows");
  const double r = std::nearbyint(x);
  if (std::abs(x - r) <= 1e-9 * std::max(1.0, x)) return static_cast<Picos>(r);
  return static_cast<Picos>(std::ceil(x));
}

namespace {

template <class T>
void heap_push(std::vector<T>& heap, T item) {
  heap.push_back(item);
  std::push_heap(heap.begin(), heap.end(), std::greater<T>());
}
template <class T>
T heap_pop(std::vector<T>& heap) {
  std::pop_heap(heap.begin(), heap.end(), std::greater<T>());
  T item = heap.back();
  heap.pop_back();
  return item;
}

}  // namespace

FlowNetwork::FlowNetwork(const Topology& topology)
    : topo_(topology),
      edge_moving_(topology.num_edges()),
      edge_seen_(topology.num_edges(), 0),
      edge_cap_(topology.num_edges(), 0),
      edge_unfrozen_(topology.num_edges(), 0),
      edge_bytes_(topology.num_edges(), 0),
      edge_flows_(topology.num_edges()) {}

int FlowNetwork::start(int src, int dst, std::int64_t bytes, std::string label) {
  const int n = static_cast<int>(topo_.nodes().size());
  TESSERA_CHECK(src >= 0 && src < n && dst >= 0 && dst < n, "sim: flow \"", label, "\" from node ",
                src, " to node ", dst, ": topology '", topo_.name, "' has nodes 0..", n - 1);
  TESSERA_CHECK(bytes >= 0, "sim: flow \"", label, "\" of ", bytes, " bytes; sizes are ≥ 0");
  const int id = static_cast<int>(flows_.size());
  Flow f{};
  f.src = src;
  f.dst = dst;
  f.bytes = bytes;
  f.route = &topo_.route(src, dst);
  f.remaining = static_cast<double>(bytes);
  f.start = now_;
  Picos latency = 0;  // route_latency(src, dst) without looking the route up again
  for (int e : *f.route) latency += topo_.links()[e / 2].latency_ps;
  f.active_at = now_ + latency;
  f.since = f.active_at;
  f.label = std::move(label);
  for (int e : *f.route) edge_flows_[e].push_back(id);
  heap_push(waiting_, Event{f.active_at, id, 0});
  flows_.push_back(std::move(f));
  flow_seen_.push_back(0);
  flow_frozen_.push_back(0);
  flow_new_rate_.push_back(0);
  ++num_unfinished_;
  return id;
}

Picos FlowNetwork::next_event() const {
  const Picos w = waiting_.empty() ? kNever : waiting_.front().t;
  const Picos f = finishing_.empty() ? kNever : finishing_.front().t;
  return std::min(w, f);
}

bool FlowNetwork::idle() const noexcept { return num_unfinished_ == 0; }

void FlowNetwork::activate(int id) {
  Flow& f = flows_[id];
  f.state = State::Moving;
  f.since = now_;
  f.slot.resize(f.route->size());
  for (std::size_t k = 0; k < f.route->size(); ++k) {
    auto& on_edge = edge_moving_[(*f.route)[k]];
    f.slot[k] = static_cast<int>(on_edge.size());
    on_edge.push_back(id);
  }
}

void FlowNetwork::finish(int id) {
  Flow& f = flows_[id];
  for (std::size_t k = 0; k < f.slot.size(); ++k) {  // swap-remove from each edge's list
    const int e = (*f.route)[k];
    auto& on_edge = edge_moving_[e];
    const int moved = on_edge.back();
    on_edge[f.slot[k]] = moved;
    on_edge.pop_back();
    if (moved != id) {
      Flow& m = flows_[moved];
      const auto pos = std::find(m.route->begin(), m.route->end(), e) - m.route->begin();
      m.slot[pos] = f.slot[k];
    }
  }
  f.slot.clear();
  f.state = State::Done;
  f.finish = now_;
  f.rate = 0;
  f.remaining = 0;
  ++f.version;
  for (int e : *f.route) edge_bytes_[e] += static_cast<double>(f.bytes);
  --num_unfinished_;
}

std::vector<int> FlowNetwork::advance(Picos t) {
  TESSERA_CHECK(t >= now_ && t <= next_event(), "sim: FlowNetwork::advance(", t,
                " ps): time must lie between now (", now_, " ps) and the next event (",
                next_event(), " ps); call next_event() first");
  now_ = t;
  std::vector<int> done, touched;
  while (!waiting_.empty() && waiting_.front().t == t) {
    const int id = heap_pop(waiting_).flow;
    activate(id);
    if (flows_[id].route->empty() || flows_[id].bytes == 0) {
      finish(id);  // nothing to move: done once the latency has elapsed
      done.push_back(id);
    } else {
      touched.insert(touched.end(), flows_[id].route->begin(), flows_[id].route->end());
    }
  }
  while (!finishing_.empty() && finishing_.front().t == t) {
    const Event ev = heap_pop(finishing_);
    Flow& f = flows_[ev.flow];
    if (f.state != State::Moving || f.version != ev.version) continue;
    touched.insert(touched.end(), f.route->begin(), f.route->end());
    finish(ev.flow);
    done.push_back(ev.flow);
  }
  if (!touched.empty()) recompute_rates(touched);
  drop_stale_events();
  std::sort(done.begin(), done.end());
  return done;
}

Picos FlowNetwork::run_to_completion() {
  while (!idle()) {
    const Picos t = next_event();
    TESSERA_ASSERT(t != kNever, num_unfinished_, " flows unfinished but none can progress");
    advance(t);
  }
  return now_;
}

void FlowNetwork::schedule_finish(int id) {
  Flow& f = flows_[id];
  ++f.version;
  f.finish = f.since + transfer_time_ps(f.remaining, f.rate);
  heap_push(finishing_, Event{f.finish, id, f.version});
}

void FlowNetwork::drop_stale_events() {
  while (!finishing_.empty()) {
    const Event& top = finishing_.front();
    const Flow& f = flows_[top.flow];
    if (f.state == State::Moving && f.version == top.version) break;
    heap_pop(finishing_);
  }
}

void FlowNetwork::recompute_rates(const std::vector<int>& touched_edges) {
  if (++epoch_ == 0) {  // wrapped: clear the stamps once every 2³² recomputations
    std::fill(edge_seen_.begin(), edge_seen_.end(), 0);
    std::fill(flow_seen_.begin(), flow_seen_.end(), 0);
    std::fill(flow_frozen_.begin(), flow_frozen_.end(), 0);
    epoch_ = 1;
  }
  // The component: every edge reachable from the touched ones through moving flows.
  comp_edges_.clear();
  comp_flows_.clear();
  for (int e : touched_edges)
    if (edge_seen_[e] != epoch_) edge_seen_[e] = epoch_, comp_edges_.push_back(e);
  for (std::size_t i = 0; i < comp_edges_.size(); ++i)
    for (int id : edge_moving_[comp_edges_[i]]) {
      if (flow_seen_[id] == epoch_) continue;
      flow_seen_[id] = epoch_;
      comp_flows_.push_back(id);
      for (int e : *flows_[id].route)
        if (edge_seen_[e] != epoch_) edge_seen_[e] = epoch_, comp_edges_.push_back(e);
    }

  // Progressive filling: the edge with the smallest fair share fixes the rate of all its
  // unfrozen flows; their other edges lose that much capacity. Freezing flows at the smallest
  // share never lowers another edge's share ((c − s)/(n − 1) ≥ c/n when s ≤ c/n), so heap keys
  // are only ever too low: an entry whose edge's share has grown is pushed back with the new
  // share instead of updating the heap on every change. Ties go to the smaller edge id.
  using Entry = std::pair<double, int>;  // (share when pushed, edge)
  std::vector<Entry>& heap = fill_heap_;
  heap.clear();
  for (int e : comp_edges_) {
    edge_cap_[e] = topo_.edge_bw(e);
    edge_unfrozen_[e] = static_cast<int>(edge_moving_[e].size());
    if (edge_unfrozen_[e] > 0) heap.emplace_back(edge_cap_[e] / edge_unfrozen_[e], e);
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<Entry>());
  while (!heap.empty()) {
    const auto [key, e] = heap_pop(heap);
    if (edge_unfrozen_[e] == 0) continue;
    const double share = edge_cap_[e] / edge_unfrozen_[e];
    if (share > key) {
      heap_push(heap, Entry{share, e});
      continue;
    }
    TESSERA_ASSERT(share > 0, "edge ", e, " has no capacity left for its flows");
    for (int id : edge_moving_[e]) {
      if (flow_frozen_[id] == epoch_) continue;
      flow_frozen_[id] = epoch_;
      flow_new_rate_[id] = share;
      for (int e2 : *flows_[id].route) {
        edge_cap_[e2] = std::max(0.0, edge_cap_[e2] - share);
        --edge_unfrozen_[e2];
      }
    }
  }

  // Apply. A change below 1e-12 relative is floating-point noise from a different order of
  // subtraction: the flow keeps its rate and its scheduled finish.
  for (int id : comp_flows_) {
    Flow& f = flows_[id];
    const double r = flow_new_rate_[id];
    if (std::abs(r - f.rate) <= 1e-12 * f.rate) continue;
    f.remaining = std::max(0.0, f.remaining - f.rate * static_cast<double>(now_ - f.since) /
                                                  kPsPerSecond);
    f.since = now_;
    f.rate = r;
    schedule_finish(id);
  }
  // Lazy deletion leaves stale finish events behind; rebuild the heap when they dominate.
  if (finishing_.size() > 2 * comp_flows_.size() + 4 * static_cast<std::size_t>(num_unfinished_) + 64) {
    std::vector<Event> live;
    for (const Event& ev : finishing_) {
      const Flow& f = flows_[ev.flow];
      if (f.state == State::Moving && f.version == ev.version) live.push_back(ev);
    }
    finishing_ = std::move(live);
    std::make_heap(finishing_.begin(), finishing_.end(), std::greater<Event>());
  }
}

void FlowNetwork::check_flow(int flow, const char* what) const {
  TESSERA_CHECK(flow >= 0 && flow < num_flows(), "sim: FlowNetwork::", what, "(", flow,
                "): no such flow (", num_flows(), " flows started)");
}

double FlowNetwork::rate(int flow) const {
  check_flow(flow, "rate");
  return flows_[flow].state == State::Moving ? flows_[flow].rate : 0;
}
Picos FlowNetwork::start_time(int flow) const {
  check_flow(flow, "start_time");
  return flows_[flow].start;
}
Picos FlowNetwork::finish_time(int flow) const {
  check_flow(flow, "finish_time");
  return flows_[flow].state == State::Done ? flows_[flow].finish : kNever;
}
const std::string& FlowNetwork::label(int flow) const {
  check_flow(flow, "label");
  return flows_[flow].label;
}

}  // namespace tessera::sim
