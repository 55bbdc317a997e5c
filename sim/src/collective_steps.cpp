// Collective steps without a flow simulation: the exact time of a step whose transfers each run at
// one constant max-min rate (constant_rate_step), and a lower bound on a whole plan
// (plan_lower_bound) that lets Auto skip algorithms that cannot win. Both matter for groups of a
// thousand ranks, where a pipelined tree is over a hundred thousand transfers.
#include "collective_steps.hpp"

#include <algorithm>
#include <cmath>

namespace tessera::sim {

namespace detail_collectives {

GroupRoutes::GroupRoutes(const Topology& t, const std::vector<int>& group)
    : t_(t), group_(group), by_from_(group.size()) {}

GroupRoutes::Route GroupRoutes::get(int from, int to) {
  auto& list = by_from_.at(from);
  for (const auto& [peer, r] : list)
    if (peer == to) return r;
  const std::int64_t key =
      static_cast<std::int64_t>(from) * static_cast<std::int64_t>(group_.size()) + to;
  if (list.size() >= 8)
    if (auto it = more_.find(key); it != more_.end()) return it->second;
  Route r;
  r.edges = &t_.route(group_[from], group_.at(to));
  for (int e : *r.edges) {
    const Link& l = t_.links()[e / 2];
    r.latency_ps += l.latency_ps;
    r.bw_bytes_per_s =
        r.bw_bytes_per_s == 0 ? l.bw_bytes_per_s : std::min(r.bw_bytes_per_s, l.bw_bytes_per_s);
  }
  if (list.size() < 8)
    list.emplace_back(to, r);
  else
    more_.emplace(key, r);
  return r;
}

bool constant_rate_step(const Topology& t, const CollectiveStep& step, GroupRoutes& routes,
                        Picos& time_ps, std::vector<double>& edge_bytes) {
  const std::vector<Link>& links = t.links();  // directed edge e runs along link e / 2
  const int ne = t.num_edges(), nf = static_cast<int>(step.transfers.size());
  std::vector<const std::vector<int>*> route(nf);
  std::vector<Picos> latency(nf, 0);
  std::vector<int> count(ne, 0);
  for (int i = 0; i < nf; ++i) {
    const Transfer& tr = step.transfers[i];
    if (tr.bytes <= 0) return false;  // the network finishes these at once, taking no share
    const GroupRoutes::Route r = routes.get(tr.from, tr.to);
    if (r.edges->empty()) return false;
    route[i] = r.edges;
    latency[i] = r.latency_ps;
    for (int e : *route[i]) ++count[e];
  }
  // The transfers on each edge, in start order (compressed rows); all must start moving together.
  std::vector<int> begin(ne + 1, 0), on(begin.size(), 0), used;
  for (int e = 0; e < ne; ++e) {
    begin[e + 1] = begin[e] + count[e];
    if (count[e] > 0) used.push_back(e);
  }
  std::vector<int> flows_on(begin[ne]);
  for (int i = 0; i < nf; ++i)
    for (int e : *route[i]) {
      const int first = on[e] == 0 ? i : flows_on[begin[e]];
      if (latency[first] != latency[i]) return false;
      flows_on[begin[e] + on[e]++] = i;
    }
  // Progressive filling exactly as FlowNetwork::recompute_rates does it, so the rates are its own.
  std::vector<double> cap(ne, 0.0), rate(nf, 0.0);
  std::vector<int> unfrozen(count), bottleneck(nf, -1);
  using Entry = std::pair<double, int>;  // (share when pushed, edge)
  std::vector<Entry> heap;
  for (int e : used) {
    cap[e] = links[e / 2].bw_bytes_per_s;
    heap.emplace_back(cap[e] / unfrozen[e], e);
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<Entry>());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Entry>());
    const auto [key, e] = heap.back();
    heap.pop_back();
    if (unfrozen[e] == 0) continue;
    const double share = cap[e] / unfrozen[e];
    if (share > key) {
      heap.emplace_back(share, e);
      std::push_heap(heap.begin(), heap.end(), std::greater<Entry>());
      continue;
    }
    if (share <= 0) return false;
    for (int k = begin[e]; k < begin[e + 1]; ++k) {
      const int i = flows_on[k];
      if (bottleneck[i] >= 0) continue;
      bottleneck[i] = e;
      rate[i] = share;
      for (int e2 : *route[i]) {
        cap[e2] = std::max(0.0, cap[e2] - share);
        --unfrozen[e2];
      }
    }
  }
  // Each transfer keeps its rate to the end when every transfer on its bottleneck edge (saturated,
  // none faster than it) lasts at least as long: then that edge stays the transfer's bottleneck.
  std::vector<Picos> lasts(nf);
  for (int i = 0; i < nf; ++i)
    lasts[i] = transfer_time_ps(static_cast<double>(step.transfers[i].bytes), rate[i]);
  Picos longest = 0;
  for (int i = 0; i < nf; ++i) {
    const int e = bottleneck[i];
    for (int k = begin[e]; k < begin[e + 1]; ++k)
      if (lasts[flows_on[k]] < lasts[i]) return false;
    longest = std::max(longest, latency[i] + lasts[i]);
  }
  time_ps = longest;
  for (int i = 0; i < nf; ++i)
    for (int e : *route[i])
      edge_bytes[e] += static_cast<double>(step.transfers[i].bytes) * step.repeat;
  return true;
}

Picos lower_bound(const Topology& t, const CollectivePlan& plan, GroupRoutes& routes) {
  const std::vector<Link>& links = t.links();  // directed edge e runs along link e / 2
  double total_ps = 0;
  std::vector<double> load(t.num_edges(), 0.0);     // bytes per edge in the current step
  std::vector<Picos> first(t.num_edges(), kNever);  // smallest latency of the step's flows on it
  std::vector<int> used;
  for (const CollectiveStep& step : plan.steps) {
    double step_ps = 0;
    for (const Transfer& tr : step.transfers) {
      const GroupRoutes::Route r = routes.get(tr.from, tr.to);
      const std::vector<int>& route = *r.edges;
      const Picos lat = r.latency_ps;
      const double bw = r.bw_bytes_per_s;
      const double bytes = static_cast<double>(tr.bytes);
      step_ps = std::max(step_ps, static_cast<double>(lat) + (bw > 0 ? bytes * 1e12 / bw : 0.0));
      for (int e : route) {
        if (first[e] == kNever) used.push_back(e);
        first[e] = std::min(first[e], lat);
        load[e] += bytes;
      }
    }
    for (int e : used) {
      step_ps = std::max(
          step_ps, static_cast<double>(first[e]) + load[e] * 1e12 / links[e / 2].bw_bytes_per_s);
      load[e] = 0;
      first[e] = kNever;
    }
    used.clear();
    total_ps += step_ps * step.repeat;
  }
  // The simulation rounds each transfer up to whole picoseconds, except that it takes a value
  // within 1e-9 relative of a whole picosecond as that one; this margin covers the latter.
  return static_cast<Picos>(std::floor(total_ps * (1 - 1e-6)));
}

}  // namespace detail_collectives

Picos plan_lower_bound(const Topology& t, const CollectivePlan& plan,
                       const std::vector<int>& group) {
  detail_collectives::GroupRoutes routes(t, group);
  return detail_collectives::lower_bound(t, plan, routes);
}

}  // namespace tessera::sim
