// simulate_iteration: a discrete-event loop over every rank's replayed program. Each device has a
// compute stream, a halo stream (point-to-point batches, FIFO) and a collective stream (FIFO); an
// op starts when its stream is free and its dependencies have finished. Events are ordered by
// (time in ps, sequence), so the result is deterministic.
#include <algorithm>
#include <array>
#include <map>
#include <queue>
#include <tuple>

#include "engine_impl.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/half.hpp"

namespace tessera::sim {

namespace {

/// Refuses a 16-bit op whose dtype the calibration did not time (see kernel_rates_dtypes).
void check_timed_dtype(const ProgramOp& op, const DeviceSpec& d, const EngineOptions& o) {
  const std::vector<core::DType>& timed = o.kernel_rates_dtypes;
  if (timed.empty() || std::find(timed.begin(), timed.end(), op.dtype) != timed.end()) return;
  std::string names;
  for (core::DType t : timed)
    names += (names.empty() ? "" : ", ") + std::string(core::dtype_name(t));
  throw InvalidArgument(detail::cat("sim: ", op.kernel, " on ", d.name,
                                    ": the calibration timed its kernels in ", names, " only, not ",
                                    core::dtype_name(op.dtype),
                                    "; calibrate again with tessera calibrate --precisions fp32,",
                                    op.dtype == core::DType::BF16 ? "bf16" : "fp16"));
}

}  // namespace

Picos kernel_time_ps(const ProgramOp& op, const DeviceSpec& d, const EngineOptions& o) {
  using compute::OpKind;
  auto rate = o.kernel_rates.find(op.kernel);
  if (rate == o.kernel_rates.end()) rate = o.kernel_rates.find(op.name);
  const bool calibrated = o.kernel_rates_device.empty() || o.kernel_rates_device == d.name;
  if (calibrated && !o.kernel_rates.empty() && core::dtype_is_half(op.dtype))
    check_timed_dtype(op, d, o);
  if (rate != o.kernel_rates.end() && calibrated) {
    const KernelRate& k = rate->second;
    const double t = k.seconds(op.flops, static_cast<double>(op.bytes), op.rows);
    return static_cast<Picos>(std::ceil(t * static_cast<double>(kPicosPerSecond) - 1e-6));
  }
  const bool gemm_like = op.op == OpKind::Conv2dForward || op.op == OpKind::Conv2dBackwardData ||
                         op.op == OpKind::Conv2dBackwardWeight || op.op == OpKind::LinearForward ||
                         op.op == OpKind::LinearBackward;
  double eff = gemm_like ? (op.depthwise ? d.eff_depthwise : d.eff_gemm) : d.eff_elementwise;
  if (auto it = o.efficiency.find(op.name); it != o.efficiency.end()) eff = it->second;
  TESSERA_CHECK(eff > 0 && eff <= 1, "sim: efficiency ", eff, " for ", op.name, " must lie in (0, 1]");
  double peak = d.peak_fp32_flops;
  if (o.tf32 && gemm_like && !op.depthwise && d.peak_tf32_flops > 0) peak = d.peak_tf32_flops;
  // Mixed precision: 16-bit convolutions and matrix products run on the tensor cores' BF16/FP16
  // peak (dense, fp32 accumulate); a device without one (a CPU) computes them at its fp32 rate.
  if (core::dtype_is_half(op.dtype) && gemm_like && !op.depthwise && d.peak_bf16_flops > 0) peak = d.peak_bf16_flops;
  const double t_flops = op.flops / (peak * eff);
  const double t_bytes = static_cast<double>(op.bytes) / (d.mem_bw_bytes_per_s * eff);
  const double t = std::max(t_flops, t_bytes) + (o.launch_overhead ? d.launch_overhead_s : 0.0);
  return static_cast<Picos>(std::ceil(t * static_cast<double>(kPicosPerSecond) - 1e-6));
}

std::string_view comm_progress_name(CommProgress p) noexcept {
  switch (p) {
    case CommProgress::Auto: return "auto";
    case CommProgress::Overlaps: return "overlaps";
    case CommProgress::InCalls: return "in-calls";
  }
  return "?";
}

CommProgress parse_comm_progress(std::string_view name) {
  for (CommProgress p : {CommProgress::Auto, CommProgress::Overlaps, CommProgress::InCalls})
    if (name == comm_progress_name(p)) return p;
  throw InvalidArgument(detail::cat("sim: communication progress '", name,
                                    "' is not one of auto, overlaps (the data moves while the ranks compute: NCCL), "
                                    "in-calls (only inside the backend's calls: local, ucx)"));
}

namespace detail_engine {

void Engine::add_in_call_progress(RankState& s) {
  const Program& p = s.replay->program;
  s.after.assign(p.size(), {});
  // A collective runs whole inside its post: the next kernel waits for it. A halo batch keeps
  // its program timing: its sends leave in the post (local copies them into the receiver's
  // mailbox, ucx sends them eagerly), so the data is on its way while the ranks compute.
  for (std::size_t j = 0; j < p.size(); ++j) {
    if (p[j].kind != ProgramOp::Kind::Collective) continue;
    for (std::size_t k = j + 1; k < p.size(); ++k)
      if (p[k].kind == ProgramOp::Kind::Compute) {
        s.after[k].push_back(static_cast<int>(j));
        break;
      }
  }
}

Engine::Engine(const std::vector<RankReplay>& ranks, const Topology& topo, const DeviceCatalog& catalog,
               const EngineOptions& options, std::vector<int> mirror)
    : topo_(topo), opt_(options), net_(topo), mirror_(std::move(mirror)) {
  const std::vector<int> nodes = topo.devices();
  TESSERA_CHECK(ranks.size() <= nodes.size(), "sim: the mesh has ", ranks.size(), " ranks but topology '", topo.name,
                "' has only ", nodes.size(), " devices; use a larger topology (e.g. dgx-a100:N)");
  ranks_.resize(ranks.size());
  if (mirror_.empty())
    for (std::size_t r = 0; r < ranks.size(); ++r) mirror_.push_back(static_cast<int>(r));
  TESSERA_CHECK(mirror_.size() == ranks.size(), "sim: ", mirror_.size(), " mirror entries for ", ranks.size(),
                " ranks");
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    TESSERA_CHECK(ranks[r].rank == static_cast<int>(r), "sim: replay ", r, " is of rank ", ranks[r].rank,
                  "; pass every rank's replay in rank order");
    RankState& s = ranks_[r];
    s.replay = &ranks[r];
    s.node = nodes[r];
    const std::string dev = opt_.device.empty() ? topo.nodes()[s.node].device : opt_.device;
    s.spec = &catalog.get(dev);
    const int m = mirror_[r];
    TESSERA_CHECK(m >= 0 && m < static_cast<int>(ranks.size()) && mirror_[m] == m, "sim: rank ", r,
                  " mirrors rank ", m, ", which is not simulated");
    if (m != static_cast<int>(r)) continue;  // copies rank m's timeline; its program is not run
    active_.push_back(static_cast<int>(r));
    const Program& p = ranks[r].program;
    s.done.assign(p.size(), -1);
    s.start.assign(p.size(), -1);
    s.pending.assign(p.size(), 0);
    if (opt_.comm_progress == CommProgress::InCalls) add_in_call_progress(s);
    for (std::size_t i = 0; i < p.size(); ++i) {
      const int stream = p[i].kind == ProgramOp::Kind::Compute ? kCompute
                         : p[i].kind == ProgramOp::Kind::P2P   ? kHalo
                                                               : kCollective;
      s.queue[stream].push_back(static_cast<int>(i));
    }
  }
  coll_edge_bytes_.assign(topo.num_edges(), 0.0);
}

bool Engine::deps_done(const RankState& s, const ProgramOp& op, int index) const {
  for (int d : op.deps)
    if (s.done[d] < 0) return false;
  if (!s.after.empty())
    for (int d : s.after[std::size_t(index)])
      if (s.done[d] < 0) return false;
  return true;
}

void Engine::schedule(int rank, int op, Picos t) { events_.push({t, seq_++, rank, op}); }

bool Engine::try_start(int r, int stream) {
  RankState& s = ranks_[r];
  if (s.busy[stream] || s.next[stream] >= s.queue[stream].size()) return false;
  const int i = s.queue[stream][s.next[stream]];
  const ProgramOp& op = s.replay->program[i];
  if (!deps_done(s, op, i)) return false;
  s.busy[stream] = true;
  s.start[i] = now_;
  if (stream == kCompute) {
    Picos t = kernel_time_ps(op, *s.spec, opt_);
    if ((opt_.waits.p2p_s > 0 || opt_.waits.collective_s > 0) &&
        (opt_.kernel_rates_device.empty() || opt_.kernel_rates_device == s.spec->name)) {
      double wait_s = 0;
      for (int d : op.deps) {
        const ProgramOp::Kind k = s.replay->program[d].kind;
        wait_s += k == ProgramOp::Kind::P2P ? opt_.waits.p2p_s : k == ProgramOp::Kind::Collective ? opt_.waits.collective_s : 0;
      }
      t += static_cast<Picos>(std::llround(wait_s * static_cast<double>(kPicosPerSecond)));
    }
    schedule(r, i, now_ + t);
  } else if (stream == kHalo) {
    post_p2p(r, i);
    if (sends_only(op) && s.done[i] < 0) {
      // A batch of sends only (a pipeline stage handing on activations or gradients) leaves in
      // its post, as the backends send: the stream goes on while it travels; finish() marks it
      // done when its transfers land.
      s.busy[stream] = false;
      ++s.next[stream];
    }
  } else {
    arrive_collective(r, i);
  }
  return true;
}

void Engine::post_p2p(int r, int i) {
  RankState& s = ranks_[r];
  const ProgramOp& op = s.replay->program[i];
  s.pending[i] = static_cast<int>(op.transfers.size());
  if (op.transfers.empty()) schedule(r, i, now_);
  for (const P2PTransfer& t : op.transfers) {
    const int src = t.send ? r : t.peer, dst = t.send ? t.peer : r;
    TESSERA_CHECK(t.peer >= 0 && t.peer < static_cast<int>(ranks_.size()) && mirror_[t.peer] == t.peer,
                  "sim: folding: rank ", r, " exchanges halos with rank ", t.peer,
                  ", which is not simulated; simulate without folding");
    // Sends and receives match in order per tag (halos, pipeline activations, their gradients):
    // the tag goes into the high bits of the sequence number.
    std::int64_t& count = (t.send ? send_seq_ : recv_seq_)[{src, dst, t.tag}];
    const std::int64_t seq = (std::int64_t(t.tag) << 32) + count++;
    Match& m = p2p_[std::make_tuple(src, dst, seq)];
    m.seq = seq;
    (t.send ? m.send : m.recv) = {r, i};
    if (t.send) m.bytes = t.bytes;
    if (m.send.first >= 0 && m.recv.first >= 0) {
      if (active_.size() < ranks_.size()) halo_pair_bytes_[{src, dst}] += m.bytes;  // folded: for the copies
      const int f = net_.start(ranks_[src].node, ranks_[dst].node, m.bytes);
      flow_match_[f] = std::make_tuple(src, dst, m.seq);
    }
  }
}

int Engine::simulated_members(const std::vector<int>& group) {
  auto it = group_needs_.find(group);
  if (it != group_needs_.end()) return it->second;
  int n = 0;
  for (int m : group) {
    TESSERA_CHECK(m >= 0 && m < static_cast<int>(ranks_.size()), "sim: a collective names rank ", m, " of ",
                  ranks_.size());
    if (mirror_[m] == m) {
      ++n;
    } else if (std::find(group.begin(), group.end(), mirror_[m]) == group.end()) {
      throw InternalError(detail::cat("sim: folding: rank ", m, " copies rank ", mirror_[m],
                                      ", which is not in its collective group; simulate without folding"));
    }
  }
  return group_needs_.emplace(group, n).first->second;
}

void Engine::arrive_collective(int r, int i) {
  const ProgramOp& op = ranks_[r].replay->program[i];
  std::int64_t& seq = coll_seq_[{r, op.group}];
  Gathering& g = colls_[{op.group, seq++}];
  g.members.emplace_back(r, i);
  if (static_cast<int>(g.members.size()) < simulated_members(op.group)) return;
  Picos dur = 0;
  if (op.group.size() > 1 && op.bytes > 0 && op.name != "barrier") {
    const TimedCollective& timed = collective(op.name, op.group, op.bytes);
    const CollectiveResult& c = timed.result;
    dur = c.time_ps;
    CollectiveUse use{op.name,    op.layer, algorithm_name(c.algorithm), op.group, op.bytes, now_,
                      now_ + dur, {}};
    for (const int e : timed.used) {
      const double b = c.edge_bytes[e];
      coll_edge_bytes_[e] += b;
      if (!opt_.collective_links) continue;
      const DirectedEdge de = topo_.edge(e);
      use.links.push_back(
          {topo_.nodes()[de.from].name, topo_.nodes()[de.to].name, topo_.links()[de.link].kind, b});
    }
    coll_uses_.push_back(std::move(use));
  }
  for (auto [mr, mi] : g.members) {
    ranks_[mr].start[mi] = now_;
    schedule(mr, mi, now_ + dur);
  }
}

const std::pair<std::vector<int>, std::vector<int>>* Engine::model_of(
    const std::vector<int>& nodes) {
  if (auto it = models_.find(nodes); it != models_.end())
    return it->second ? &*it->second : nullptr;
  if (!symmetry_) symmetry_.emplace(topo_);
  // Try the models of the same size, a few at most: groups that no symmetry relates are timed
  // themselves at the cost of a failed propagation each.
  int tried = 0;
  for (const auto& [model, of] : models_) {
    if (of || model.size() != nodes.size() || ++tried > 4) continue;
    if (std::optional<std::vector<int>> edges = symmetry_->edge_map(model, nodes)) {
      auto& entry = models_[nodes];
      entry.emplace(model, std::move(*edges));
      return &*entry;
    }
  }
  models_.emplace(nodes, std::nullopt);
  return nullptr;
}

CollectiveResult Engine::time_collective(const std::string& name, const std::vector<int>& nodes,
                                         std::int64_t bytes) {
  auto& routes = group_routes_[nodes];
  if (!routes) routes = std::make_unique<detail_collectives::GroupRoutes>(topo_, nodes);
  return detail_collectives::simulate_collective(topo_, parse_collective_op(name),
                                                 opt_.collective_algorithm, bytes, *routes);
}

const TimedCollective& Engine::collective(const std::string& name, const std::vector<int>& group,
                                          std::int64_t bytes) {
  std::vector<int> nodes;
  for (int m : group) nodes.push_back(ranks_.at(m).node);
  const auto key = std::make_tuple(name, nodes, bytes);
  auto it = coll_cache_.find(key);
  if (it != coll_cache_.end()) return it->second;
  const auto* model = opt_.engine == EngineKind::Fast ? model_of(nodes) : nullptr;
  if (!model)
    return coll_cache_.emplace(key, TimedCollective(time_collective(name, nodes, bytes)))
        .first->second;
  // The model's result, its link bytes renamed onto this group's links.
  const auto mk = std::make_tuple(name, model->first, bytes);
  auto m = coll_cache_.find(mk);
  if (m == coll_cache_.end())
    m = coll_cache_.emplace(mk, TimedCollective(time_collective(name, model->first, bytes))).first;
  CollectiveResult r = m->second.result;
  std::fill(r.edge_bytes.begin(), r.edge_bytes.end(), 0.0);
  for (const int e : m->second.used)
    r.edge_bytes[model->second[e]] = m->second.result.edge_bytes[e];
  return coll_cache_.emplace(key, TimedCollective(std::move(r))).first->second;
}

void Engine::finish(int r, int i, Picos t) {
  RankState& s = ranks_[r];
  const ProgramOp& op = s.replay->program[i];
  s.done[i] = t;
  const int stream = op.kind == ProgramOp::Kind::Compute ? kCompute : op.kind == ProgramOp::Kind::P2P ? kHalo : kCollective;
  if (stream != kHalo || !sends_only(op)) {  // a batch of sends released its stream when posted
    s.busy[stream] = false;
    ++s.next[stream];
  }
  if (opt_.trace) record_op(r, i);
}

void Engine::flow_done(int f) {
  const auto key = flow_match_.at(f);
  const Match& m = p2p_.at(key);
  if (opt_.trace) record_flow(f, std::get<0>(key), std::get<1>(key), m);
  for (auto [r, i] : {m.send, m.recv})
    if (--ranks_[r].pending[i] == 0) schedule(r, i, now_);
}

void Engine::run() {
  for (;;) {
    bool changed = true;
    while (changed) {
      changed = false;
      for (int r : active_)
        for (int stream = 0; stream < kNumStreams; ++stream) changed |= try_start(r, stream);
    }
    const Picos t_ev = events_.empty() ? kNever : events_.top().t;
    const Picos t = std::min(t_ev, net_.next_event());
    if (t == kNever) break;
    now_ = t;
    for (int f : net_.advance(t)) flow_done(f);
    while (!events_.empty() && events_.top().t == t) {
      const Event e = events_.top();
      events_.pop();
      finish(e.rank, e.op, t);
    }
  }
  for (int r : active_) {
    const RankState& s = ranks_[r];
    for (int stream = 0; stream < kNumStreams; ++stream) {
      if (s.next[stream] >= s.queue[stream].size()) continue;
      const ProgramOp& op = s.replay->program[s.queue[stream][s.next[stream]]];
      throw InternalError(detail::cat("sim: the programs deadlock: rank ", r, " never finishes ", op.name, " of layer '",
                                      op.layer, "'; its peers' programs do not match (replay every rank of one mesh)"));
    }
  }
}

}  // namespace detail_engine

std::string_view engine_kind_name(EngineKind k) noexcept {
  return k == EngineKind::Exact ? "exact" : "fast";
}

EngineKind parse_engine_kind(std::string_view name) {
  if (name == "fast") return EngineKind::Fast;
  if (name == "exact") return EngineKind::Exact;
  throw InvalidArgument(detail::cat("sim: engine '", name,
                                    "' is not one of fast (symmetric ranks, routes and collective "
                                    "groups timed once per class: the default), exact (every rank, "
                                    "route and group on its own: the reference)"));
}

SimResult simulate_iteration(const std::vector<RankReplay>& ranks, const Topology& topology,
                             const DeviceCatalog& catalog, const EngineOptions& options) {
  if (options.engine == EngineKind::Exact && topology.symmetric_routing()) {
    Topology own = topology;  // every route from its own search
    own.set_symmetric_routing(false);
    return simulate_iteration(ranks, own, catalog, options);
  }
  detail_engine::Engine e(ranks, topology, catalog, options);
  e.run();
  return e.result();
}

}  // namespace tessera::sim
