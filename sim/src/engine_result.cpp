// The engine's output: trace events in core's schema (the runtime's: one 'X' event per kernel,
// collective and transfer, flows from send to receive, memory counters), per-device figures and
// link utilisation.
#include <algorithm>

#include "engine_impl.hpp"

namespace tessera::sim::detail_engine {

namespace {
double us(Picos t) { return static_cast<double>(t) / 1e6; }
}  // namespace

void Engine::record_op(int r, int i) {
  const RankState& s = ranks_[r];
  const ProgramOp& op = s.replay->program[i];
  if (op.kind == ProgramOp::Kind::P2P) return;  // its transfers are recorded as they complete
  core::TraceEvent e;
  e.name = op.name;
  e.op = op.name;
  e.layer = op.layer;
  e.micro = op.micro;
  e.pid = r;
  e.ts_us = us(s.start[i]);
  e.dur_us = us(s.done[i] - s.start[i]);
  e.bytes = op.bytes;
  e.coords = s.replay->coords;
  if (op.kind == ProgramOp::Kind::Compute) {
    e.cat = "compute";
    e.tid = core::kLaneCompute;
    e.flops = op.flops;
    core::TraceEvent c;
    c.ph = 'C';
    c.name = "memory";
    c.pid = r;
    c.ts_us = e.ts_us;
    for (int k = 0; k < core::kNumMemCategories; ++k)
      c.counters.emplace_back(std::string(core::mem_category_name(static_cast<core::MemCategory>(k))),
                              static_cast<double>(op.memory[k]));
    trace_.push_back(std::move(e));
    trace_.push_back(std::move(c));
    return;
  }
  e.cat = "comm";
  e.tid = core::kLaneComm;
  trace_.push_back(std::move(e));
}

void Engine::record_flow(int f, int src, int dst, const Match& m) {
  const Picos t0 = net_.start_time(f), t1 = net_.finish_time(f);
  for (const bool send : {true, false}) {
    const auto [r, i] = send ? m.send : m.recv;
    const int peer = send ? dst : src;
    core::TraceEvent e;
    e.name = send ? "send" : "recv";
    e.cat = "halo";
    e.op = e.name;
    e.layer = ranks_[r].replay->program[i].layer;
    e.micro = ranks_[r].replay->program[i].micro;
    e.pid = r;
    e.tid = core::kLaneHaloBase + peer;
    e.ts_us = us(t0);
    e.dur_us = us(t1 - t0);
    e.bytes = m.bytes;
    e.peer = peer;
    e.coords = ranks_[r].replay->coords;
    e.flow_id = std::to_string(src) + "_" + std::to_string(dst) + "_" + std::to_string(m.seq);
    e.flow_out = send;
    e.flow_in = !send;
    trace_.push_back(std::move(e));
  }
}

SimResult Engine::result() {
  SimResult res;
  res.simulated_ranks = static_cast<int>(active_.size());
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const RankState& s = ranks_[r];
    DeviceResult d;
    d.rank = static_cast<int>(r);
    d.simulated_as = mirror_[r];
    d.device = s.spec->name;
    d.memory = s.replay->memory;
    if (mirror_[r] != d.rank) {  // a folded rank: filled in below from the rank it copies
      res.devices.push_back(std::move(d));
      continue;
    }
    std::vector<std::pair<Picos, Picos>> comm;
    for (std::size_t i = 0; i < s.done.size(); ++i) {
      d.end_ps = std::max(d.end_ps, s.done[i]);
      if (s.replay->program[i].kind == ProgramOp::Kind::Compute) d.compute_busy_ps += s.done[i] - s.start[i];
      else comm.emplace_back(s.start[i], s.done[i]);
    }
    std::sort(comm.begin(), comm.end());
    Picos covered_to = 0;
    for (auto [a, b] : comm) {  // length of the union of the intervals
      a = std::max(a, covered_to);
      if (b > a) d.comm_busy_ps += b - a;
      covered_to = std::max(covered_to, b);
    }
    res.iteration_ps = std::max(res.iteration_ps, d.end_ps);
    std::string coords;
    for (int c : s.replay->coords) coords += (coords.empty() ? "" : ",") + std::to_string(c);
    res.process_names.emplace_back(d.rank, "rank " + std::to_string(r) + " (" + coords + ") " + d.device);
    res.devices.push_back(std::move(d));
  }
  for (DeviceResult& d : res.devices) {
    if (d.simulated_as == d.rank) continue;
    const DeviceResult& m = res.devices[d.simulated_as];
    d.end_ps = m.end_ps;
    d.compute_busy_ps = m.compute_busy_ps;
    d.comm_busy_ps = m.comm_busy_ps;
  }
  const double seconds = static_cast<double>(res.iteration_ps) / static_cast<double>(kPicosPerSecond);
  std::vector<double> halo_bytes = net_.edge_bytes();
  add_mirrored_traffic(halo_bytes);
  for (int e = 0; e < topo_.num_edges(); ++e) {
    const double bytes = halo_bytes[e] + coll_edge_bytes_[e];
    if (bytes <= 0) continue;
    LinkUse l;
    const DirectedEdge de = topo_.edge(e);
    l.from = topo_.nodes()[de.from].name;
    l.to = topo_.nodes()[de.to].name;
    l.kind = topo_.links()[de.link].kind;
    l.bytes = bytes;
    l.utilisation = seconds > 0 ? bytes / (topo_.edge_bw(e) * seconds) : 0.0;
    res.links.push_back(std::move(l));
  }
  std::stable_sort(res.links.begin(), res.links.end(),
                   [](const LinkUse& a, const LinkUse& b) { return a.utilisation > b.utilisation; });
  res.collectives = std::move(coll_uses_);
  std::vector<int> critical_flows;
  res.critical_path = critical_path(critical_flows);
  if (opt_.trace) mark_critical(res.critical_path, critical_flows);
  std::stable_sort(trace_.begin(), trace_.end(), [](const core::TraceEvent& a, const core::TraceEvent& b) {
    return a.pid != b.pid ? a.pid < b.pid : a.ts_us < b.ts_us;
  });
  res.trace = std::move(trace_);
  return res;
}

}  // namespace tessera::sim::detail_engine
