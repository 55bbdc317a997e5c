// Internal to the event engine: the per-rank stream state and the Engine that engine.cpp runs and
// engine_result.cpp turns into trace events, link utilisation and per-device figures.
#pragma once

#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <tuple>
#include <utility>
#include <vector>

#include "collective_steps.hpp"
#include "group_symmetry.hpp"
#include "tessera/sim/engine.hpp"
#include "tessera/sim/network.hpp"

namespace tessera::sim::detail_engine {

/// A batch of sends only (a pipeline stage handing on activations or gradients): it leaves in its
/// post, as the backends send, so its stream goes on while it travels.
inline bool sends_only(const ProgramOp& op) {
  if (op.kind != ProgramOp::Kind::P2P || op.transfers.empty()) return false;
  for (const P2PTransfer& t : op.transfers)
    if (!t.send) return false;
  return true;
}

enum StreamId { kCompute = 0, kHalo = 1, kCollective = 2, kNumStreams = 3 };

struct RankState {
  const RankReplay* replay = nullptr;
  int node = -1;
  const DeviceSpec* spec = nullptr;
  std::vector<Picos> start, done;  ///< per op; -1 until it started / finished
  std::vector<int> pending;        ///< p2p ops: transfers still in flight
  /// Per op, ops it waits for besides its program dependencies: what CommProgress::InCalls
  /// adds (the kernel after a collective waits for the collective). Empty for Overlaps.
  std::vector<std::vector<int>> after;
  std::array<std::vector<int>, kNumStreams> queue;  ///< op indices per stream, issue order
  std::array<std::size_t, kNumStreams> next{};
  std::array<bool, kNumStreams> busy{};
};

/// One send matched with its receive: (rank, op) of each side.
struct Match {
  std::pair<int, int> send{-1, -1}, recv{-1, -1};
  std::int64_t bytes = 0;
  std::int64_t seq = 0;
};

/// The members of one collective that have reached it so far.
struct Gathering {
  std::vector<std::pair<int, int>> members;
};

/// A collective as the engine timed it, with the edges that carried its bytes (ascending): an
/// arrival adds those, not a pass over every edge of a thousand-node topology.
struct TimedCollective {
  CollectiveResult result;
  std::vector<int> used;
  explicit TimedCollective(CollectiveResult r) : result(std::move(r)) {
    for (std::size_t e = 0; e < result.edge_bytes.size(); ++e)
      if (result.edge_bytes[e] > 0) used.push_back(static_cast<int>(e));
  }
};

struct Event {  ///< an op finishing; ordered by (t, seq)
  Picos t;
  std::int64_t seq;
  int rank, op;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

class Engine {
 public:
  /// `mirror[r]` is the rank whose timeline rank r copies (r itself, or an empty list: every rank
  /// is simulated). A mirrored rank's program is not simulated (fold.hpp, simulate_iteration).
  Engine(const std::vector<RankReplay>& ranks, const Topology& topo, const DeviceCatalog& catalog,
         const EngineOptions& options, std::vector<int> mirror = {});
  void run();
  SimResult result();

 private:
  bool deps_done(const RankState& s, const ProgramOp& op, int index) const;
  /// Fills RankState::after for a rank whose communication moves only inside calls.
  static void add_in_call_progress(RankState& s);
  bool try_start(int rank, int stream);
  void post_p2p(int rank, int op);
  void arrive_collective(int rank, int op);
  void schedule(int rank, int op, Picos t);
  void finish(int rank, int op, Picos t);
  void flow_done(int flow);
  void record_op(int rank, int op);
  void record_flow(int flow, int src, int dst, const Match& m);
  /// The number of simulated members of a collective group (checked once per group: a mirrored
  /// member's model must be in the group, or its arrival would be unknown).
  int simulated_members(const std::vector<int>& group);
  /// Walks back from the op that finished last (critical_path.cpp); `flows` gets the network
  /// flows of its halo links.
  std::vector<CriticalStep> critical_path(std::vector<int>& flows) const;
  /// Sets critical = true on the trace events of the path's ops and flows (critical_path.cpp).
  void mark_critical(const std::vector<CriticalStep>& path, const std::vector<int>& flows);
  /// With folding: adds to `edge_bytes` the halo transfers and collectives that the mirrored ranks
  /// would have run (each simulated transfer and collective renamed as FoldedReplay::replay_for
  /// renames it, routed between the renamed ranks' own devices), and appends those collectives to
  /// coll_uses_ (engine_mirror.cpp). Nothing when every rank is simulated.
  void add_mirrored_traffic(std::vector<double>& edge_bytes);
  /// Runs (cached) the collective `name` of `bytes` per rank over `group`'s devices. The fast
  /// engine renames the result of a group that a symmetry of the topology maps onto this one.
  const TimedCollective& collective(const std::string& name, const std::vector<int>& group,
                                    std::int64_t bytes);
  /// Fast engine: a group timed before that a symmetry maps onto `nodes`, with its edge renaming;
  /// nullptr when there is none (`nodes` then becomes a model for later groups).
  const std::pair<std::vector<int>, std::vector<int>>* model_of(const std::vector<int>& nodes);

  const Topology& topo_;
  EngineOptions opt_;
  FlowNetwork net_;
  std::vector<RankState> ranks_;
  std::vector<int> mirror_;  ///< per rank: the rank it copies (itself when simulated)
  std::vector<int> active_;  ///< the simulated ranks, in rank order
  std::map<std::vector<int>, int> group_needs_;
  Picos now_ = 0;
  std::int64_t seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::map<std::tuple<int, int, int>, std::int64_t> send_seq_,
      recv_seq_;  // (src, dst, tag) → next seq
  std::map<std::tuple<int, int, std::int64_t>, Match> p2p_;
  std::map<int, std::tuple<int, int, std::int64_t>> flow_match_;
  std::map<std::pair<int, std::vector<int>>, std::int64_t> coll_seq_;  // (rank, group) → next seq
  std::map<std::pair<std::vector<int>, std::int64_t>, Gathering> colls_;
  std::map<std::tuple<std::string, std::vector<int>, std::int64_t>, TimedCollective> coll_cache_;
  std::optional<GroupSymmetry> symmetry_;  ///< fast engine: built for the first collective
  /// Per group of nodes timed: its routes and step templates, kept across sizes and algorithms.
  std::map<std::vector<int>, std::unique_ptr<detail_collectives::GroupRoutes>> group_routes_;
  /// Runs simulate_collective on `nodes` through its kept GroupRoutes.
  CollectiveResult time_collective(const std::string& name, const std::vector<int>& nodes,
                                   std::int64_t bytes);
  /// Fast engine, per group of nodes: its model group and edge renaming (none: it is a model).
  std::map<std::vector<int>, std::optional<std::pair<std::vector<int>, std::vector<int>>>> models_;
  std::vector<double> coll_edge_bytes_;
  std::vector<CollectiveUse> coll_uses_;  ///< SimResult::collectives
  std::map<std::pair<int, int>, std::int64_t> halo_pair_bytes_;  ///< (src, dst) rank → bytes sent
  std::vector<core::TraceEvent> trace_;
};

}  // namespace tessera::sim::detail_engine
