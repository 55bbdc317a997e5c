// Collective steps without a flow simulation: the exact time of a step whose transfers each run at
// one constant max-min rate (constant_rate_step), and a lower bound on a whole plan
// (plan_lower_bound) that lets Auto skip algorithms that cannot win. Both matter for groups of a
// thousand ranks, where a pipelined tree is over a hundred thousand transfers.
#include "collective_steps.hpp"

#include "tessera/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <thread>
#include <unordered_set>

namespace tessera::sim {

namespace detail_collectives {

GroupRoutes::GroupRoutes(const Topology& t, std::vector<int> group)
    : t_(t), group_(std::move(group)), by_from_(group_.size()) {}

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

std::vector<int>& GroupRoutes::edge_slot() {
  if (edge_slot_.empty()) edge_slot_.assign(t_.num_edges(), -1);
  return edge_slot_;
}

namespace {

/// A step's transfers with their max-min rates, all moving (fill_step).
struct Filling {
  std::vector<const std::vector<int>*> route;
  std::vector<Picos> latency;
  std::vector<double> rate;
  std::vector<int> bottleneck;       ///< per transfer: the compact edge it froze on
  std::vector<int> begin, flows_on;  ///< per compact edge: its transfers (compressed rows)
  std::vector<int> used;             ///< compact edge → edge id
};

/// Progressive filling of `step` as FlowNetwork::recompute_rates does it. False when the step is
/// not one the filling times exactly: a transfer of no bytes, an empty route, transfers of
/// different route latencies on one edge (they would not start moving together), no capacity.
/// The routes and the per-edge scratch a filling reads: the group's own (one thread), or its
/// looked-up routes with a thread's own scratch (GroupRoutes::fill_templates).
struct FillSource {
  GroupRoutes* routes = nullptr;        ///< get(): looks up and caches
  const GroupRoutes* cached = nullptr;  ///< find(): routes looked up before, read only
  std::vector<int>* slot = nullptr;
  GroupRoutes::Route route(int from, int to) const {
    return routes ? routes->get(from, to) : cached->find(from, to);
  }
};

bool fill_step(const Topology& t, const CollectiveStep& step, const FillSource& src, Filling& fill);
void fill_template_from(const Topology& t, const CollectiveStep& step, const FillSource& src,
                        StepTemplate& tpl);

bool fill_step(const Topology& t, const CollectiveStep& step, GroupRoutes& routes, Filling& fill) {
  return fill_step(t, step, FillSource{&routes, nullptr, &routes.edge_slot()}, fill);
}

bool fill_step(const Topology& t, const CollectiveStep& step, const FillSource& src,
               Filling& fill) {
  const std::vector<Link>& links = t.links();  // directed edge e runs along link e / 2
  const int nf = static_cast<int>(step.transfers.size());
  std::vector<const std::vector<int>*>& route = fill.route;
  std::vector<Picos>& latency = fill.latency;
  route.assign(nf, nullptr);
  latency.assign(nf, 0);
  for (int i = 0; i < nf; ++i) {
    const Transfer& tr = step.transfers[i];
    if (tr.bytes <= 0) return false;  // the network finishes these at once, taking no share
    const GroupRoutes::Route r = src.route(tr.from, tr.to);
    if (r.edges->empty()) return false;
    route[i] = r.edges;
    latency[i] = r.latency_ps;
  }
  // The edges the step uses, numbered 0..m−1 in order of first use (slot[e]); reset on return.
  std::vector<int>& slot = *src.slot;
  std::vector<int>& used = fill.used;
  used.clear();
  std::vector<int> count;
  for (int i = 0; i < nf; ++i)
    for (int e : *route[i]) {
      if (slot[e] < 0) {
        slot[e] = static_cast<int>(used.size());
        used.push_back(e);
        count.push_back(0);
      }
      ++count[slot[e]];
    }
  struct Reset {  // every exit leaves the slots as it found them
    std::vector<int>& slot;
    const std::vector<int>& used;
    ~Reset() {
      for (int e : used) slot[e] = -1;
    }
  } reset{slot, used};
  const int m = static_cast<int>(used.size());
  // The transfers on each edge, in start order (compressed rows); all must start moving together.
  std::vector<int>& begin = fill.begin;
  begin.assign(m + 1, 0);
  std::vector<int> on(m, 0);
  for (int k = 0; k < m; ++k) begin[k + 1] = begin[k] + count[k];
  std::vector<int>& flows_on = fill.flows_on;
  flows_on.assign(begin[m], 0);
  for (int i = 0; i < nf; ++i)
    for (int e : *route[i]) {
      const int k = slot[e];
      const int first = on[k] == 0 ? i : flows_on[begin[k]];
      if (latency[first] != latency[i]) return false;
      flows_on[begin[k] + on[k]++] = i;
    }
  // Progressive filling exactly as FlowNetwork::recompute_rates does it, so the rates are its own
  // (ties between equal shares go to the smaller edge id, as there). A transfer alone on every
  // edge of its route shares nothing: its rate is its slowest edge's, no heap needed (most of a
  // large tree's or ring's transfers); the heap holds the edges of the others only, which form
  // components of their own, so the rates come out as the heap over every edge gives them.
  std::vector<double> cap(m, 0.0);
  std::vector<double>& rate = fill.rate;
  rate.assign(nf, 0.0);
  std::vector<int> unfrozen(count);
  std::vector<int>& bottleneck = fill.bottleneck;
  bottleneck.assign(nf, -1);
  std::vector<char> in_heap(m, 0);
  for (int k = 0; k < m; ++k) cap[k] = links[used[k] / 2].bw_bytes_per_s;
  for (int i = 0; i < nf; ++i) {
    bool alone = true;
    for (int e : *route[i]) alone = alone && count[slot[e]] == 1;
    if (!alone) {
      for (int e : *route[i]) in_heap[slot[e]] = 1;
      continue;
    }
    int best = -1;
    for (int e : *route[i]) {
      const int k = slot[e];
      if (best < 0 || cap[k] < cap[best] || (cap[k] == cap[best] && e < used[best])) best = k;
    }
    if (cap[best] <= 0) return false;
    bottleneck[i] = best;
    rate[i] = cap[best];
  }
  // The others, component by component (transfers joined by a shared edge): each component's
  // filling is independent of the others', and a small heap is cheaper than one over every edge.
  std::vector<int> parent(nf);
  for (int i = 0; i < nf; ++i) parent[i] = i;
  const auto root = [&](int i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  for (int k = 0; k < m; ++k)
    for (int j = begin[k] + 1; j < begin[k + 1]; ++j) {
      const int a = root(flows_on[begin[k]]), b = root(flows_on[j]);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
  std::vector<int> first(nf, -1), next(nf, -1);  // per root: its transfers as a linked list
  for (int i = nf - 1; i >= 0; --i)
    if (bottleneck[i] < 0) {
      const int r = root(i);
      next[i] = first[r];
      first[r] = i;
    }
  using Entry = std::pair<double, int>;  // (share when pushed, edge)
  std::vector<Entry> heap;
  for (int r = 0; r < nf; ++r) {
    if (first[r] < 0) continue;
    heap.clear();
    for (int i = first[r]; i >= 0; i = next[i])
      for (int e : *route[i]) {
        const int k = slot[e];
        if (in_heap[k] != 1) continue;
        in_heap[k] = 2;  // pushed once
        heap.emplace_back(cap[k] / unfrozen[k], e);
      }
    std::make_heap(heap.begin(), heap.end(), std::greater<Entry>());
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<Entry>());
      const auto [key, e] = heap.back();
      heap.pop_back();
      const int k = slot[e];
      if (unfrozen[k] == 0) continue;
      const double share = cap[k] / unfrozen[k];
      if (share > key) {
        heap.emplace_back(share, e);
        std::push_heap(heap.begin(), heap.end(), std::greater<Entry>());
        continue;
      }
      if (share <= 0) return false;
      for (int j = begin[k]; j < begin[k + 1]; ++j) {
        const int i = flows_on[j];
        if (bottleneck[i] >= 0) continue;
        bottleneck[i] = k;
        rate[i] = share;
        for (int e2 : *route[i]) {
          const int k2 = slot[e2];
          cap[k2] = std::max(0.0, cap[k2] - share);
          --unfrozen[k2];
        }
      }
    }
  }
  return true;
}

}  // namespace

bool constant_rate_step(const Topology& t, const CollectiveStep& step, GroupRoutes& routes,
                        Picos& time_ps, std::vector<double>& edge_bytes) {
  Filling fill;
  if (!fill_step(t, step, routes, fill)) return false;
  const int nf = static_cast<int>(step.transfers.size());
  const auto& [route, latency, rate, bottleneck, begin, flows_on, used] = fill;
  (void)used;
  // Each transfer keeps its rate to the end when every transfer on its bottleneck edge (saturated,
  // none faster than it) lasts at least as long: then that edge stays the transfer's bottleneck.
  std::vector<Picos> lasts(nf);
  for (int i = 0; i < nf; ++i)
    lasts[i] = transfer_time_ps(static_cast<double>(step.transfers[i].bytes), rate[i]);
  Picos longest = 0;
  for (int i = 0; i < nf; ++i) {
    const int k = bottleneck[i];
    for (int j = begin[k]; j < begin[k + 1]; ++j)
      if (lasts[flows_on[j]] < lasts[i]) return false;
    longest = std::max(longest, latency[i] + lasts[i]);
  }
  time_ps = longest;
  for (int i = 0; i < nf; ++i)
    for (int e : *route[i])
      edge_bytes[e] += static_cast<double>(step.transfers[i].bytes) * step.repeat;
  return true;
}

Picos StepTemplate::time_ps(std::int64_t bytes) const {
  Picos longest = 0;
  for (const auto& [latency, rate] : latency_rate)
    longest = std::max(longest, latency + transfer_time_ps(static_cast<double>(bytes), rate));
  return longest;
}

double StepTemplate::bound_ps(std::int64_t bytes) const {
  const double b = static_cast<double>(bytes);
  double step_ps = 0;
  for (const auto& [latency, bw] : latency_bw)
    step_ps = std::max(step_ps, static_cast<double>(latency) + (bw > 0 ? b * 1e12 / bw : 0.0));
  for (const auto& [first, count, bw] : edge_load)
    step_ps = std::max(step_ps, static_cast<double>(first) + count * b * 1e12 / bw);
  return step_ps;
}

namespace {

template <class T>
void add_distinct(std::vector<T>& list, const T& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

}  // namespace

StepTemplate GroupRoutes::make_template(const CollectiveStep& step) {
  StepTemplate tpl;
  const std::vector<Link>& links = t_.links();
  std::vector<int>& slot = edge_slot();
  std::vector<int> used;  // compact edge k → edge id, in order of first use
  std::vector<Picos> first;
  std::vector<int> count;
  for (const Transfer& tr : step.transfers) {
    const Route r = get(tr.from, tr.to);
    add_distinct(tpl.latency_bw, {r.latency_ps, r.bw_bytes_per_s});
    for (int e : *r.edges) {
      if (slot[e] < 0) {
        slot[e] = static_cast<int>(used.size());
        used.push_back(e);
        first.push_back(r.latency_ps);
        count.push_back(0);
      }
      const int k = slot[e];
      first[k] = std::min(first[k], r.latency_ps);
      ++count[k];
    }
  }
  for (std::size_t k = 0; k < used.size(); ++k) {
    add_distinct(tpl.edge_load,
                 {first[k], static_cast<double>(count[k]), links[used[k] / 2].bw_bytes_per_s});
    slot[used[k]] = -1;
  }
  return tpl;
}

void GroupRoutes::fill_template(const CollectiveStep& step, StepTemplate& tpl) {
  fill_template_from(t_, step, FillSource{this, nullptr, &edge_slot()}, tpl);
}

namespace {

void fill_template_from(const Topology& t, const CollectiveStep& step, const FillSource& src,
                        StepTemplate& tpl) {
  tpl.filled = true;
  tpl.constant_rate = false;
  tpl.latency_rate.clear();
  tpl.edge_transfers.clear();
  // The rates, and the bottleneck each transfer froze on: constant_rate_step's filling. Whatever
  // the size, a transfer keeps its rate when every transfer on its bottleneck is no faster.
  Filling fill;
  if (!fill_step(t, step, src, fill)) return;
  const int nf = static_cast<int>(step.transfers.size());
  std::vector<std::pair<Picos, double>> latency_rate;
  for (int i = 0; i < nf; ++i) {
    const int k = fill.bottleneck[i];
    for (int j = fill.begin[k]; j < fill.begin[k + 1]; ++j)
      if (fill.rate[fill.flows_on[j]] > fill.rate[i]) return;
    add_distinct(latency_rate, {fill.latency[i], fill.rate[i]});
  }
  tpl.edge_transfers.reserve(fill.used.size());
  for (std::size_t k = 0; k < fill.used.size(); ++k)
    tpl.edge_transfers.emplace_back(fill.used[k], fill.begin[k + 1] - fill.begin[k]);
  tpl.latency_rate = std::move(latency_rate);
  tpl.constant_rate = true;
}

}  // namespace

GroupRoutes::Route GroupRoutes::find(int from, int to) const {
  for (const auto& [peer, r] : by_from_.at(from))
    if (peer == to) return r;
  const std::int64_t key =
      static_cast<std::int64_t>(from) * static_cast<std::int64_t>(group_.size()) + to;
  const auto it = more_.find(key);
  if (it == more_.end())
    throw InternalError(detail::cat("sim: collective route ", from, " → ", to, " not looked up"));
  return it->second;
}

void GroupRoutes::fill_templates(const std::vector<CollectiveStep>& steps, unsigned threads) {
  std::vector<std::pair<const CollectiveStep*, StepTemplate*>> unfilled;  // each template once
  std::unordered_set<const StepTemplate*> seen;
  std::size_t transfers = 0;
  for (const CollectiveStep& step : steps) {
    StepTemplate* tpl = template_of(step);  // routes looked up here, on this thread
    if (!tpl || tpl->filled || !seen.insert(tpl).second) continue;
    unfilled.emplace_back(&step, tpl);
    transfers += step.transfers.size();
  }
  const bool asked = threads > 0;
  if (!asked) threads = std::min(std::max(1u, std::thread::hardware_concurrency()), 8u);
  threads = std::min(threads, static_cast<unsigned>(std::max<std::size_t>(1, unfilled.size())));
  if (threads < 2 || (!asked && transfers < 50'000)) {  // threads would cost more than they save
    for (auto& [step, tpl] : unfilled) fill_template(*step, *tpl);
    return;
  }
  // Each thread fills every threads-th template with its own edge scratch; the routes are only
  // read (find), each template written by one thread.
  std::vector<std::vector<int>> slots(threads, std::vector<int>(t_.num_edges(), -1));
  std::vector<std::exception_ptr> errors(threads);
  const auto work = [&](unsigned w) {
    try {
      for (std::size_t i = w; i < unfilled.size(); i += threads)
        fill_template_from(t_, *unfilled[i].first, FillSource{nullptr, this, &slots[w]},
                           *unfilled[i].second);
    } catch (...) {
      errors[w] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < threads; ++w) pool.emplace_back(work, w);
  work(0);
  for (std::thread& th : pool) th.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

const StepTemplate* GroupRoutes::step_template(const CollectiveStep& step, bool rates) {
  StepTemplate* tpl = template_of(step);
  if (tpl && rates && !tpl->filled) fill_template(step, *tpl);
  return tpl;
}

StepTemplate* GroupRoutes::template_of(const CollectiveStep& step) {
  if (step.transfers.empty()) return nullptr;
  const std::int64_t bytes = step.transfers[0].bytes;
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the (from, to) list
  for (const Transfer& tr : step.transfers) {
    if (tr.bytes != bytes || bytes <= 0) return nullptr;
    h = (h ^ static_cast<std::uint32_t>(tr.from)) * 1099511628211ull;
    h = (h ^ static_cast<std::uint32_t>(tr.to)) * 1099511628211ull;
  }
  auto& bucket = templates_[h];
  for (const auto& [shape, tpl] : bucket) {
    if (shape.size() != step.transfers.size()) continue;
    bool same = true;
    for (std::size_t i = 0; same && i < shape.size(); ++i)
      same = shape[i].first == step.transfers[i].from && shape[i].second == step.transfers[i].to;
    if (same) return tpl.get();
  }
  Shape shape;
  shape.reserve(step.transfers.size());
  for (const Transfer& tr : step.transfers) shape.emplace_back(tr.from, tr.to);
  bucket.emplace_back(std::move(shape), std::make_unique<StepTemplate>(make_template(step)));
  return bucket.back().second.get();
}

Picos lower_bound(const Topology& t, const CollectivePlan& plan, GroupRoutes& routes) {
  const std::vector<Link>& links = t.links();  // directed edge e runs along link e / 2
  double total_ps = 0;
  std::vector<double> load;  // bytes per edge in the current step (steps of unequal sizes)
  std::vector<Picos> first;  // smallest latency of the step's flows on it
  std::vector<int> used;
  for (const CollectiveStep& step : plan.steps) {
    if (const StepTemplate* tpl = routes.step_template(step)) {
      total_ps += tpl->bound_ps(step.transfers[0].bytes) * step.repeat;
      continue;
    }
    if (load.empty()) {
      load.assign(t.num_edges(), 0.0);
      first.assign(t.num_edges(), kNever);
    }
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

Picos heaviest_step_bound(const CollectivePlan& plan, GroupRoutes& routes) {
  const CollectiveStep* heaviest = nullptr;
  double weight = 0;
  for (const CollectiveStep& step : plan.steps) {
    const double w = static_cast<double>(step.transfers.size()) * step.repeat;
    if (w > weight) weight = w, heaviest = &step;
  }
  if (!heaviest) return 0;
  const StepTemplate* tpl = routes.step_template(*heaviest);
  if (!tpl) return 0;  // transfers of different sizes: no cheap bound, the full one decides
  // The same margin as lower_bound's: this is one of the terms lower_bound adds up.
  return static_cast<Picos>(
      std::floor(tpl->bound_ps(heaviest->transfers[0].bytes) * heaviest->repeat * (1 - 1e-6)));
}

}  // namespace detail_collectives

Picos plan_lower_bound(const Topology& t, const CollectivePlan& plan,
                       const std::vector<int>& group) {
  detail_collectives::GroupRoutes routes(t, group);
  return detail_collectives::lower_bound(t, plan, routes);
}

}  // namespace tessera::sim
