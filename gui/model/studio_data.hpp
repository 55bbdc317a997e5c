// Plain data the studio's views draw, built from core (layouts, halo plans) and sim (SimResult,
// topology): shard map, timeline, memory bars, topology graph. No widgets; tested headless.
#pragma once

#include <QPointF>
#include <QRectF>
#include <QString>
#include <array>
#include <cstdint>
#include <vector>

#include "tessera/core/trace.hpp"
#include "tessera/nn/halo_plan.hpp"
#include "tessera/sim/engine.hpp"
#include "tessera/sim/topology.hpp"

namespace tessera::studio {

// ---- shard map ---------------------------------------------------------------------------------

/// One halo message of one rank for one convolution: `box` (global input indices).
struct HaloRegion {
  int peer = -1;
  nn::Box box;
  std::int64_t bytes = 0;
};

/// One rank's part of an activation and the halos the next convolution exchanges.
struct ShardInfo {
  int rank = 0;
  std::vector<int> coords;
  nn::Box own;   ///< what the rank holds
  nn::Box need;  ///< what the convolution reads (own + halos, clipped to the tensor)
  std::vector<HaloRegion> recvs, sends;
  std::int64_t recvBytes() const;
  std::int64_t sendBytes() const;
};

/// The input activation of one convolution of the model, with the per-rank halo plans
/// (nn::make_halo_plan on the layouts core's setup gives the layer).
struct ShardLayer {
  QString name;                     ///< module path ("stem.conv", "stages.0.blocks.0.dwconv")
  QString conv;                     ///< ConvSpec::describe()
  core::Shape shape;                ///< global input shape (N,C,H,W)
  QString layout;                   ///< core::Layout::to_string()
  std::vector<ShardInfo> shards;    ///< by rank
  std::size_t haloRegions() const;  ///< received pieces over all ranks
};

struct ShardMap {
  std::vector<ShardLayer>
      layers;  ///< every convolution in forward order; [0] reads the model input
};

/// Builds the model (core's build_model), runs setup on a meta allocator and asks core for every
/// convolution's halo plan on every rank. Throws what core throws for an impossible layout.
ShardMap buildShardMap(const nn::TrainOptions& train, const core::DeviceMesh& mesh);

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
};

struct TimelineEvent {
  int lane = 0;
  sim::Picos startPs = 0, durPs = 0;
  QString name, cat, op, layer;
  std::int64_t bytes = -1;
  double flops = -1;
  int peer = -1;
  bool critical = false;  ///< on the critical path (sim::SimResult::critical_path, via the trace)
  sim::Picos endPs() const { return startPs + durPs; }
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
};

/// Lanes and events from a trace in core's schema (the simulator's, or a measured one).
TimelineData buildTimeline(const std::vector<core::TraceEvent>& trace, int numRanks);

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
  bool oom() const { return static_cast<double>(peakTotalBytes) > capacityBytes; }
};

std::vector<MemoryBar> buildMemoryBars(const sim::SimResult& r, const sim::DeviceCatalog& catalog);
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
  std::vector<LinkCollective> collectives;  ///< in the order they started
  double maxUtilisation() const {
    return utilisation[0] > utilisation[1] ? utilisation[0] : utilisation[1];
  }
};

struct TopologyGraph {
  QString name, description;
  std::vector<GraphNode> nodes;
  std::vector<GraphLink> links;
};

TopologyGraph buildTopologyGraph(const sim::Topology& topo, const sim::SimResult& r, int numRanks);

/// "1.50 GB", "147 kB" (powers of 1000, as the CLI's tables).
QString formatBytes(double bytes);
/// "18.57 ms" (sim::format_duration).
QString formatPs(sim::Picos ps);

}  // namespace tessera::studio
