// Flow-level network model: transfers routed over the topology share every directed edge they
// cross max-min fairly (progressive filling), each after its route's latency. Integer picoseconds,
// deterministic.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tessera/sim/topology.hpp"

namespace tessera::sim {

inline constexpr Picos kNever = std::numeric_limits<Picos>::max();

/// Picoseconds to move `bytes` at `rate` bytes/s as the network rounds them: up, except that a
/// value within 1e-9 relative of a whole picosecond is that picosecond (floating-point noise on
/// exact cases, not a speed-up). 0 for no bytes.
Picos transfer_time_ps(double bytes, double rate_bytes_per_s);

/// Incremental flow simulation. The caller (a collective or the event engine) starts flows at the
/// current time, asks when the next one finishes, and advances time. No flow ever moves faster
/// than the slowest edge of its route allows, and flows sharing an edge split its bandwidth
/// max-min fairly.
///
/// Times are whole picoseconds: a flow's data phase lasts remaining·10¹²/rate rounded *up* (a
/// value within 10⁻⁹ relative of a whole picosecond counts as that picosecond: floating-point
/// noise, not a speed-up). Rates are recomputed only for the flows that share an edge,
/// transitively, with a flow that started moving or finished (max-min allocations of disjoint
/// components are independent), by progressive filling with a heap of edges: O(L log L) for the
/// L flow-edge incidences of that component, never O(flows²). Not thread-safe; one network per
/// simulation.
class FlowNetwork {
 public:
  /// The topology must outlive the network (routes are borrowed from its cache).
  explicit FlowNetwork(const Topology& topology);
  FlowNetwork(Topology&&) = delete;  ///< a temporary topology would dangle

  /// Starts a transfer of `bytes` from node `src` to node `dst` at now(); data begins to move
  /// after the route's latency. A transfer to itself completes after 0 ps. Returns the flow id.
  /// Throws InvalidArgument for an unknown node or negative bytes.
  int start(int src, int dst, std::int64_t bytes, std::string label = {});
  /// When the next flow completes (or starts moving data) at current rates; kNever when idle.
  Picos next_event() const;
  /// Moves time forward to `t` (now() ≤ t ≤ next_event()) and returns the ids of the flows that
  /// completed at exactly t.
  /// Throws InvalidArgument when t is outside that range.
  std::vector<int> advance(Picos t);
  /// Runs until every flow has completed; returns the completion time.
  Picos run_to_completion();
  Picos now() const noexcept { return now_; }
  /// True when every flow started so far has completed.
  bool idle() const noexcept;
  int num_flows() const noexcept { return static_cast<int>(flows_.size()); }
  /// Current rate of a flow in bytes per second (0 before its latency has elapsed and once done).
  double rate(int flow) const;

  /// When the flow was started. Flow ids are those start() returned (InvalidArgument otherwise).
  Picos start_time(int flow) const;
  Picos finish_time(int flow) const;  ///< kNever while running

  /// Bytes carried per directed edge by the flows completed so far (exact once idle();
  /// utilisation over a window = bytes / (bw · window)).
  const std::vector<double>& edge_bytes() const noexcept { return edge_bytes_; }
  /// Ids of the flows routed over each directed edge, in start order (the studio lists their
  /// labels for a link).
  const std::vector<std::vector<int>>& edge_flows() const noexcept { return edge_flows_; }
  const std::string& label(int flow) const;
  const Topology& topology() const noexcept { return topo_; }

 private:
  enum class State : std::uint8_t { Waiting, Moving, Done };
  struct Flow {
    int src, dst;
    std::int64_t bytes;
    const std::vector<int>* route;  // cached in the topology, stable
    double remaining;               // bytes still to move at `since`
    Picos start, active_at, finish = kNever, since = 0;
    double rate = 0;                // bytes per second while Moving
    std::uint32_t version = 0;      // bumped whenever `finish` is recomputed
    State state = State::Waiting;
    std::vector<int> slot;          // per route edge: index in edge_moving_ while Moving
    std::string label;
  };
  struct Event {  // a heap entry, ordered by (t, flow); stale when the flow's version moved on
    Picos t;
    int flow;
    std::uint32_t version;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : flow > o.flow; }
  };
  void activate(int f);
  void finish(int f);
  void recompute_rates(const std::vector<int>& touched_edges);
  void schedule_finish(int f);
  void drop_stale_events();
  void check_flow(int flow, const char* what) const;

  const Topology& topo_;
  Picos now_ = 0;
  std::vector<Flow> flows_;
  int num_unfinished_ = 0;
  std::vector<Event> waiting_;    // min-heap by active_at
  std::vector<Event> finishing_;  // min-heap by finish (lazy deletion)
  std::vector<std::vector<int>> edge_moving_;  // per edge: flows moving data over it now
  // Scratch for recompute_rates, stamped with `epoch_` instead of cleared.
  std::uint32_t epoch_ = 0;
  std::vector<std::uint32_t> edge_seen_, flow_seen_, flow_frozen_;
  std::vector<double> edge_cap_, flow_new_rate_;
  std::vector<int> edge_unfrozen_;
  std::vector<int> comp_edges_, comp_flows_;
  std::vector<std::pair<double, int>> fill_heap_;
  std::vector<double> edge_bytes_;
  std::vector<std::vector<int>> edge_flows_;
};

}  // namespace tessera::sim
