// Lower bounds on the event engine's iteration time from a folded replay, without the engine.
//
// Why the bound is valid. The engine runs each rank's program on three FIFO streams (compute,
// halo, collective), each in program order; an op starts no earlier than its stream's previous op
// ended and than its program dependencies (ProgramOp::deps, and with CommProgress::InCalls the
// collectives before a kernel) ended. Its duration is at least:
//   compute: kernel_time_ps plus the calibrated waits, exactly as the engine adds them;
//   halo: the slowest of its transfers alone (route latency + bytes / route bandwidth): the flow
//     starts at the later post, so no earlier than this rank's, and never moves faster than its
//     route's slowest edge;
//   collective: the smallest plan_lower_bound among the algorithms the engine may pick (Auto picks
//     the fastest simulated one, each at least its own bound); it starts at the last arrival, so
//     no earlier than this rank's.
// The relaxed schedule — every op at its earliest start under those constraints alone, with no
// waiting for peers or contention — is monotone in start times and durations, so by induction in
// program order each op ends in it no later than in the engine. The engine's iteration time is the
// latest end over its simulated ranks, so the relaxed end of any simulated rank bounds it from
// below. We take one simulated rank per (class, device): the ranks of the slabs fold_engine
// simulates (the first slab of each kind), replayed as the engine replays them (replay_for).
// Rank 0 is always simulated (its slab has the smallest key), so rank 0's replay alone gives a
// bound before the other classes are replayed.
#include "plan_bounds.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <utility>

#include "tessera/core/error.hpp"

namespace tessera::sim::detail_plan {

Picos CollectiveBounds::get(const std::string& name, const std::vector<int>& nodes,
                            std::int64_t bytes) {
  if (nodes.size() <= 1 || bytes <= 0 || name == "barrier") return 0;
  auto key = std::make_tuple(name, nodes, bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  }
  const CollectiveOp op = parse_collective_op(name);
  const std::vector<Algorithm> algos =
      algo_ == Algorithm::Auto ? candidate_algorithms(topo_, op, nodes) : std::vector{algo_};
  Picos best = -1;
  for (Algorithm a : algos) {
    try {
      const Picos b = plan_lower_bound(topo_, plan_collective(topo_, op, a, nodes, bytes), nodes);
      best = best < 0 ? b : std::min(best, b);
    } catch (const Unsupported&) {
      // the engine cannot run it either: no bound from this algorithm
    }
  }
  best = std::max<Picos>(best, 0);
  std::lock_guard<std::mutex> lock(mutex_);
  cache_.emplace(std::move(key), best);
  return best;
}

namespace {

std::string device_of(const Topology& t, const std::vector<int>& nodes, int rank,
                      const EngineOptions& o) {
  return o.device.empty() ? t.nodes()[static_cast<std::size_t>(nodes[rank])].device : o.device;
}

// The ranks fold_engine's simulate_iteration simulates: the first slab (in key order) of each kind.
std::vector<int> simulated_ranks(const FoldedReplay& f, const Topology& t,
                                 const std::vector<int>& nodes, const EngineOptions& o) {
  std::map<std::vector<int>, std::vector<int>> slabs;
  for (int r = 0; r < f.num_ranks(); ++r) {
    std::vector<int> key;
    const std::vector<int> c = f.mesh.coords_of(r);
    for (int d = 0; d < f.mesh.ndim(); ++d)
      if (f.window[static_cast<std::size_t>(d)] == 0) key.push_back(c[static_cast<std::size_t>(d)]);
    slabs[key].push_back(r);
  }
  std::set<std::vector<std::pair<int, std::string>>> kinds;
  std::vector<int> out;
  for (const auto& [key, members] : slabs) {
    std::vector<std::pair<int, std::string>> kind;
    for (int r : members)
      kind.emplace_back(f.class_of[static_cast<std::size_t>(r)], device_of(t, nodes, r, o));
    if (kinds.insert(std::move(kind)).second) out.insert(out.end(), members.begin(), members.end());
  }
  return out;
}

Picos halo_bound(const ProgramOp& op, int rank, const Topology& t, const std::vector<int>& nodes) {
  Picos longest = 0;
  for (const P2PTransfer& x : op.transfers) {
    const int a = nodes[static_cast<std::size_t>(rank)],
              b = nodes[static_cast<std::size_t>(x.peer)];
    if (a == b || x.bytes <= 0) continue;
    const int src = x.send ? a : b, dst = x.send ? b : a;
    // Slightly under bytes / bandwidth: the network rounds its data phases up, never down.
    const double bw = t.route_bw(src, dst);
    const double data = bw > 0 ? static_cast<double>(x.bytes) / bw *
                                     static_cast<double>(kPicosPerSecond) * (1 - 1e-6)
                               : 0.0;
    longest = std::max(longest, t.route_latency(src, dst) + static_cast<Picos>(data));
  }
  return longest;
}

// The calibrated waits the engine adds to a compute op (engine.cpp, try_start), exactly.
Picos compute_time(const ProgramOp& op, const Program& p, const DeviceSpec& spec,
                   const EngineOptions& o) {
  Picos t = kernel_time_ps(op, spec, o);
  if ((o.waits.p2p_s > 0 || o.waits.collective_s > 0) &&
      (o.kernel_rates_device.empty() || o.kernel_rates_device == spec.name)) {
    double wait_s = 0;
    for (int d : op.deps) {
      const ProgramOp::Kind k = p[static_cast<std::size_t>(d)].kind;
      wait_s += k == ProgramOp::Kind::P2P          ? o.waits.p2p_s
                : k == ProgramOp::Kind::Collective ? o.waits.collective_s
                                                   : 0;
    }
    t += static_cast<Picos>(std::llround(wait_s * static_cast<double>(kPicosPerSecond)));
  }
  return t;
}

struct RankContext {
  const Topology& topo;
  const std::vector<int>& nodes;
  const DeviceSpec& spec;
  const EngineOptions& options;
  CollectiveBounds& collectives;
};

// The relaxed schedule of one rank's program (see the top of the file): its last end.
Picos rank_bound(const RankReplay& rr, RankContext& cx) {
  const Program& p = rr.program;
  std::vector<Picos> done(p.size(), 0);
  std::array<Picos, 3> stream_free{};
  std::vector<int> collectives_since_compute;  // CommProgress::InCalls: the next kernel waits
  const bool in_calls = cx.options.comm_progress == CommProgress::InCalls;
  Picos end = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const ProgramOp& op = p[i];
    const int stream = op.kind == ProgramOp::Kind::Compute ? 0
                       : op.kind == ProgramOp::Kind::P2P   ? 1
                                                           : 2;
    Picos start = stream_free[static_cast<std::size_t>(stream)];
    for (int d : op.deps) start = std::max(start, done[static_cast<std::size_t>(d)]);
    Picos dur = 0;
    if (op.kind == ProgramOp::Kind::Compute) {
      if (in_calls)
        for (int d : collectives_since_compute)
          start = std::max(start, done[static_cast<std::size_t>(d)]);
      collectives_since_compute.clear();
      dur = compute_time(op, p, cx.spec, cx.options);
    } else if (op.kind == ProgramOp::Kind::P2P) {
      dur = halo_bound(op, rr.rank, cx.topo, cx.nodes);
    } else {
      collectives_since_compute.push_back(static_cast<int>(i));
      std::vector<int> group_nodes;
      for (int m : op.group) group_nodes.push_back(cx.nodes[static_cast<std::size_t>(m)]);
      dur = cx.collectives.get(op.name, group_nodes, op.bytes);
    }
    done[i] = start + dur;
    stream_free[static_cast<std::size_t>(stream)] = done[i];
    end = std::max(end, done[i]);
  }
  return end;
}

}  // namespace

Picos rank_lower_bound(const RankReplay& rr, const Topology& topology, const DeviceCatalog& catalog,
                       const EngineOptions& options, CollectiveBounds& collectives) {
  const std::vector<int> nodes = topology.devices();
  RankContext cx{topology, nodes, catalog.get(device_of(topology, nodes, rr.rank, options)),
                 options, collectives};
  return rank_bound(rr, cx);
}

Picos iteration_lower_bound(const FoldedReplay& f, const Topology& topology,
                            const DeviceCatalog& catalog, const EngineOptions& options,
                            CollectiveBounds& collectives) {
  const std::vector<int> nodes = topology.devices();
  std::set<std::pair<int, std::string>> seen;  // (class, device) bounded so far
  Picos bound = 0;
  for (int r : simulated_ranks(f, topology, nodes, options)) {
    if (!seen.emplace(f.class_of[static_cast<std::size_t>(r)],
                      device_of(topology, nodes, r, options))
             .second)
      continue;
    bound =
        std::max(bound, rank_lower_bound(f.replay_for(r), topology, catalog, options, collectives));
  }
  return bound;
}

void set_memory(const std::vector<const RankReplay*>& classes, int ranks, const Topology& topology,
                const DeviceCatalog& catalog, const PlanOptions& o, PlanEntry& e) {
  e.peak_bytes = e.activation_peak_bytes = 0;
  for (const RankReplay* c : classes) {
    e.peak_bytes = std::max(e.peak_bytes, c->memory.peak_total);
    e.activation_peak_bytes =
        std::max(e.activation_peak_bytes, c->memory.peak_of(core::MemCategory::Activation));
  }
  e.limit_bytes = o.memory_cap_bytes;
  if (o.memory_cap_bytes <= 0) {
    const std::vector<int> nodes = topology.devices();
    std::set<std::string> devices;
    for (int r = 0; r < ranks; ++r) devices.insert(device_of(topology, nodes, r, o.engine));
    for (const std::string& d : devices) {
      const double cap = catalog.get(d).capacity_bytes;
      e.limit_bytes = e.limit_bytes > 0 ? std::min(e.limit_bytes, cap) : cap;
    }
  }
  e.fits = static_cast<double>(e.peak_bytes) <= e.limit_bytes;
}

}  // namespace tessera::sim::detail_plan
