// Plain data the studio's views draw, built from core (layouts, halo plans) and sim (SimResult,
// topology): shard map, timeline, memory bars, topology graph. No widgets; tested headless.
#pragma once

#include <QPointF>
#include <QRectF>
#include <QString>
#include <array>
#include <cstdint>
#include <vector>

#include "shard_map.hpp"
#include "tessera/core/trace.hpp"
#include "tessera/sim/engine.hpp"
#include "tessera/sim/topology.hpp"

namespace tessera::studio {

// ---- shard map (shard_map.hpp) ---------------------------------------------------------------

/// Where a box of an (H,W) plane goes when the plane (shape[2] × shape[3]) is scaled uniformly
/// into `area` (top-left aligned): pixel rectangle of global rows/columns [h0,h1) × [w0,w1).
struct PlaneGeometry {
  QRectF area;
  std::int64_t height = 1, width = 1;
  double scale() const;  ///< pixels per element
  QRectF rectOf(const nn::Box& b) const;
  /// The element (row, column) under a point, or (-1, -1) outside the plane.
  std::pair<std::int64_t, std::int64_t> elementAt(QPointF p) const;
};

// ---- timeline ----------------------------------------------------------------------------------

struct TimelineLane {
  int rank = 0;
  bool comm = false;  ///< false: compute kernels; true: collectives and halo transfers
  QString label;
  int mirrors = 0;  ///< other ranks the same as this one (folded: simulated once, as `rank`)
  int stage = -1;   ///< the rank's pipeline stage (setLaneStages); -1 without stages
};

struct TimelineEvent {
  int lane = 0;
  sim::Picos startPs = 0, durPs = 0;
  QString name, cat, op, layer;
  std::int64_t bytes = -1;
  double flops = -1;
  int peer = -1;
  bool critical = false;  ///< on the critical path (sim::SimResult::critical_path, via the trace)
  int micro = -1;         ///< the micro-batch it belongs to (the trace's args "micro"); -1: none
  sim::Picos endPs() const { return startPs + durPs; }
  /// A transfer between pipeline stages (layer "pipeline.send_activation", ...).
  bool pipeline() const { return layer.startsWith(QLatin1String("pipeline.")); }
};

/// A halo send joined to its receive (indices into events).
struct TimelineArrow {
  int from = -1, to = -1;
};

struct TimelineData {
  std::vector<TimelineLane> lanes;    ///< rank 0 compute, rank 0 comm, rank 1 compute, ...
  std::vector<TimelineEvent> events;  ///< the simulator's complete events, in trace order
  std::vector<TimelineArrow> arrows;
  sim::Picos endPs = 0;
  int microBatches = 0;  ///< 1 + the largest micro-batch of an event; 0 when none carries one
  int stages = 0;        ///< pipeline stages (setLaneStages); 0 without
  /// Per rank: the rank whose lanes show it (itself, or with folding the simulated rank it is
  /// the same as).
  std::vector<int> sameAs;
  /// Lanes (compute, comm) of `rank` or of the rank it is the same as; -1 when none.
  int laneOf(int rank) const;
  /// "rank 4711: same as rank 7" (folded), "rank 7" (simulated), "" for an unknown rank.
  QString rankText(int rank) const;
};

/// Lanes for every rank below numRanks and their events from a trace in core's schema (the
/// simulator's with every rank simulated, or a measured one).
TimelineData buildTimeline(const std::vector<core::TraceEvent>& trace, int numRanks);
/// Lanes for the simulated ranks only (DeviceResult::simulated_as == rank: with folding the few
/// whose programs ran, and whose events the trace holds); every other rank shows as the one it is
/// simulated as. O(events + ranks).
TimelineData buildTimeline(const std::vector<core::TraceEvent>& trace,
                           const std::vector<sim::DeviceResult>& devices);

/// With a mesh dimension named "pp" of more than one stage: each lane's stage (the rank's "pp"
/// coordinate, nn::Trainer::stage()) and its label "r3 · stage 1 compute"; nothing otherwise.
void setLaneStages(TimelineData& timeline, const core::DeviceMesh& mesh);

/// Time ↔ pixel mapping of the timeline: integer picoseconds per pixel, so that
/// timeAt(x(t)) == t for every t and x(timeAt(px)) == px for every whole pixel.
class TimeAxis {
 public:
  TimeAxis(sim::Picos originPs = 0, sim::Picos psPerPixel = 1);
  sim::Picos origin() const { return origin_; }
  sim::Picos psPerPixel() const { return psPerPx_; }
  double x(sim::Picos t) const;       ///< pixel of a time
  sim::Picos timeAt(double x) const;  ///< time of a pixel (nearest picosecond)
  /// Fits [0, endPs] into `pixels`.
  static TimeAxis fit(sim::Picos endPs, double pixels);
  /// Zooms by `factor` (> 1 zooms in) keeping the time under pixel `anchorX` in place.
  void zoom(double factor, double anchorX);
  /// Moves the view by `dx` pixels (positive: later times come into view).
  void pan(double dx);

 private:
  sim::Picos origin_;
  sim::Picos psPerPx_;
};

// ---- memory ------------------------------------------------------------------------------------

struct MemoryBar {
  int rank = 0;
  QString device;
  std::array<std::int64_t, core::kNumMemCategories> peakBytes{};  ///< per category
  std::int64_t peakTotalBytes = 0;  ///< peak of the sum (the simulator's figure)
  double capacityBytes = 0;
  std::vector<int> alike;  ///< grouped (groupMemoryBars): the other ranks with these figures
  bool oom() const { return static_cast<double>(peakTotalBytes) > capacityBytes; }
};

std::vector<MemoryBar> buildMemoryBars(const sim::SimResult& r, const sim::DeviceCatalog& catalog);
/// Above this many devices the memory view draws one bar per group of equal bars.
inline constexpr int kMemoryBarsMax = 64;
/// Bars with equal figures (device, every category's peak, the total, the capacity) as one: the
/// first rank's, the others in `alike`; in the order of their first rank. O(bars log bars).
std::vector<MemoryBar> groupMemoryBars(const std::vector<MemoryBar>& bars);
/// "parameters", "gradients", "optimizer state", "activations", "halo buffers", "workspace".
QString memCategoryLabel(int category);

// ---- topology ----------------------------------------------------------------------------------

struct GraphNode {
  QString name, kind, device;
  int rank = -1;  ///< the rank it runs, or -1
  int host = -1;  ///< sim::Node::host: the machine it belongs to; -1 for a cluster switch
  QPointF pos;    ///< in [0,1]²: compute nodes at the bottom, switches above
};

/// One halo transfer routed over a link (from the trace's sends and the topology's routes).
struct LinkTransfer {
  int fromRank = -1, toRank = -1;
  QString layer;
  std::int64_t bytes = 0;
  bool forward = true;  ///< direction a→b
};

/// One collective's bytes on a link: SimResult::collectives, the steps of sim's collective model
/// (ring, tree, ...) routed over the topology.
struct LinkCollective {
  QString name, layer, algorithm;
  int ranks = 0;             ///< group size
  std::int64_t size = 0;     ///< the per-rank buffer
  double bytes[2] = {0, 0};  ///< a→b, b→a
};

struct GraphLink {
  int a = -1, b = -1;
  QString kind;
  double bwBytesPerS = 0;
  double utilisation[2] = {0, 0};  ///< a→b, b→a (SimResult::links)
  double bytes[2] = {0, 0};
  std::vector<LinkTransfer> transfers;
  /// In the order they started; filled on graphs of at most kListedCollectivesMaxDevices compute
  /// nodes (TopologyGraph::collectivesOf gives them on any graph).
  std::vector<LinkCollective> collectives;
  double maxUtilisation() const {
    return utilisation[0] > utilisation[1] ? utilisation[0] : utilisation[1];
  }
};

/// One collective's bytes on one link: an index into TopologyGraph::collectiveInfo.
struct CollectiveOnLink {
  int collective = -1;
  double bytes[2] = {0, 0};  ///< a→b, b→a
};

/// Up to this many compute nodes every GraphLink::collectives is filled; above (hundreds of
/// thousands of entries at 8,192 GPUs) the compact index alone, read per link when shown.
inline constexpr int kListedCollectivesMaxDevices = 64;

struct TopologyGraph {
  QString name, description;
  std::vector<GraphNode> nodes;
  std::vector<GraphLink> links;
  /// Per SimResult::collectives entry: its name, layer, algorithm, group size and buffer (bytes 0).
  std::vector<LinkCollective> collectiveInfo;
  /// Link i's collectives: collectiveUses[collectiveStart[i] .. collectiveStart[i + 1]), in the
  /// order they started (empty without a result).
  std::vector<int> collectiveStart;
  std::vector<CollectiveOnLink> collectiveUses;
  /// Link `link`'s collectives with their bytes, as GraphLink::collectives lists them.
  std::vector<LinkCollective> collectivesOf(int link) const;
};

/// The topology's nodes and links with `r`'s figures (topology_graph.hpp: built as
/// applyResult(*buildTopologyBase(topo, numRanks), topo, r)).
TopologyGraph buildTopologyGraph(const sim::Topology& topo, const sim::SimResult& r, int numRanks);

/// "1.50 GB", "147 kB" (powers of 1000, as the CLI's tables).
QString formatBytes(double bytes);
/// "18.57 ms" (sim::format_duration).
QString formatPs(sim::Picos ps);

}  // namespace tessera::studio
