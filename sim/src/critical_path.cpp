// The critical path of a simulated iteration: from the op that finished last, repeatedly step to
// the dependency that released it (the latest-finishing of its program dependencies and its
// stream predecessor; for a collective, the member that arrived last; for a halo batch, the
// transfer that finished last and the side that posted it last), until an op that waited for
// nothing. Then the trace events of those ops are marked.
#include <algorithm>
#include <set>
#include <tuple>

#include "engine_impl.hpp"
#include "tessera/core/error.hpp"

namespace tessera::sim::detail_engine {

namespace {

int stream_of(const ProgramOp& op) {
  return op.kind == ProgramOp::Kind::Compute ? kCompute : op.kind == ProgramOp::Kind::P2P ? kHalo : kCollective;
}

const char* stream_name(int stream) {
  return stream == kCompute ? "compute" : stream == kHalo ? "halo" : "collective";
}

double us(Picos t) { return static_cast<double>(t) / 1e6; }

}  // namespace

std::vector<CriticalStep> Engine::critical_path(std::vector<int>& flows) const {
  flows.clear();
  // The op that finished last (lowest rank, then lowest index, among ties).
  int r = -1, i = -1;
  Picos end = -1;
  for (int a : active_)
    for (std::size_t k = 0; k < ranks_[a].done.size(); ++k)
      if (ranks_[a].done[k] > end) std::tie(r, i, end) = std::make_tuple(a, static_cast<int>(k), ranks_[a].done[k]);
  if (r < 0) return {};

  // Position of every op in its stream's queue, and the flows of every halo batch.
  std::vector<std::vector<int>> pos(ranks_.size());
  for (int a : active_) {
    pos[a].assign(ranks_[a].done.size(), -1);
    for (const auto& q : ranks_[a].queue)
      for (std::size_t k = 0; k < q.size(); ++k) pos[a][q[k]] = static_cast<int>(k);
  }
  std::map<std::pair<int, int>, std::vector<int>> batch_flows;
  for (const auto& [f, key] : flow_match_) {
    const Match& m = p2p_.at(key);
    batch_flows[m.send].push_back(f);
    batch_flows[m.recv].push_back(f);
  }
  // The dependency of (a, k) that finished last: program dependencies first, then the stream
  // predecessor when it finished strictly later. {-1, -1} when the op waited for nothing.
  auto releaser = [&](int a, int k) {
    const RankState& s = ranks_[a];
    const ProgramOp& op = s.replay->program[k];
    std::pair<int, int> best{-1, -1};
    Picos t = -1;
    for (int d : op.deps)
      if (s.done[d] > t) std::tie(best, t) = std::make_pair(std::make_pair(a, d), s.done[d]);
    if (!s.after.empty())  // what CommProgress::InCalls adds
      for (int d : s.after[std::size_t(k)])
        if (s.done[d] > t) std::tie(best, t) = std::make_pair(std::make_pair(a, d), s.done[d]);
    const int p = pos[a][k];
    if (p > 0) {
      const int prev = s.queue[stream_of(op)][p - 1];
      // A batch of sends released its stream when it was posted, not when it landed.
      const Picos released = sends_only(s.replay->program[prev]) ? s.start[prev] : s.done[prev];
      if (released > t) std::tie(best, t) = std::make_pair(std::make_pair(a, prev), released);
    }
    return std::make_pair(best, t);
  };

  std::vector<CriticalStep> path;
  for (;;) {
    const ProgramOp& op = ranks_[r].replay->program[i];
    CriticalStep st;
    st.stream = stream_name(stream_of(op));
    st.start_ps = ranks_[r].start[i];
    st.end_ps = ranks_[r].done[i];
    int from_r = r, from_i = i;  // whose release to follow
    if (op.kind == ProgramOp::Kind::Collective) {
      // It began when its last member arrived: follow that member (this rank among ties).
      for (const auto& [key, g] : colls_) {
        if (std::find(g.members.begin(), g.members.end(), std::make_pair(r, i)) == g.members.end()) continue;
        Picos latest = releaser(r, i).second;
        for (auto [mr, mi] : g.members) {
          const Picos t = releaser(mr, mi).second;
          if (t > latest) std::tie(from_r, from_i, latest) = std::make_tuple(mr, mi, t);
        }
        break;
      }
    } else if (op.kind == ProgramOp::Kind::P2P) {
      auto it = batch_flows.find({r, i});
      if (it != batch_flows.end()) {
        int last = -1;  // the transfer that finished last
        for (int f : it->second)
          if (last < 0 || net_.finish_time(f) > net_.finish_time(last)) last = f;
        const Match& m = p2p_.at(flow_match_.at(last));
        const std::pair<int, int> other = m.send == std::make_pair(r, i) ? m.recv : m.send;
        st.peer = other.first;
        st.start_ps = net_.start_time(last);
        flows.push_back(last);
        // The transfer began when its later side posted: this side among ties.
        if (ranks_[r].start[i] < st.start_ps) std::tie(from_r, from_i) = other;
      }
    }
    st.rank = from_r == r || op.kind != ProgramOp::Kind::Collective ? r : from_r;
    st.op = st.rank == r ? i : from_i;
    st.name = op.name;
    st.layer = op.layer;
    const auto [prev, prev_end] = releaser(from_r, from_i);
    st.wait_ps = st.start_ps - std::max<Picos>(prev_end, 0);
    if (st.wait_ps < 0)
      throw InternalError(detail::cat("sim: critical path: ", op.name, " of rank ", r, " started at ", st.start_ps,
                                      " ps, before its dependency finished at ", prev_end, " ps"));
    path.push_back(std::move(st));
    if (prev.first < 0) break;
    std::tie(r, i) = prev;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

void Engine::mark_critical(const std::vector<CriticalStep>& path, const std::vector<int>& flows) {
  std::set<std::tuple<int, int, double, std::string>> ops;  // (pid, lane, ts, name)
  for (const CriticalStep& s : path)
    if (s.stream != "halo")
      ops.emplace(s.rank, s.stream == "compute" ? core::kLaneCompute : core::kLaneComm, us(s.start_ps), s.name);
  std::set<std::string> flow_ids;
  for (int f : flows) {
    const auto& [src, dst, seq] = flow_match_.at(f);
    flow_ids.insert(std::to_string(src) + "_" + std::to_string(dst) + "_" + std::to_string(seq));
  }
  for (core::TraceEvent& e : trace_) {
    if (e.ph != 'X') continue;
    if (e.cat == "halo" ? flow_ids.count(e.flow_id) > 0 : ops.count({e.pid, e.tid, e.ts_us, e.name}) > 0)
      e.critical = true;
  }
}

}  // namespace tessera::sim::detail_engine
