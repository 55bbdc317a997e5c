// The topology view at cluster scale: a TopologyGraph of thousands of devices drawn whole is a
// smear, so above a threshold it is drawn aggregated — one box per host (or per group of hosts),
// one box per cluster switch (or per group of leaves serving one group of hosts), and one line
// per pair of boxes and link kind — with the utilisation of the links each aggregate stands for.
// A host can be zoomed into: its own nodes and links, drawn as the full view draws them. No
// widgets; tested headless.
#pragma once

#include <QPointF>
#include <QString>
#include <vector>

#include "studio_data.hpp"

namespace tessera::studio {

struct AggregateOptions {
  int fullMaxDevices = 64;  ///< up to this many compute nodes the topology is drawn whole
  int maxHostBoxes =
      16;  ///< hosts are grouped (consecutive hosts) so that at most this many boxes remain
  int maxSwitchBoxes =
      16;  ///< cluster switches likewise; leaves that serve one host box are grouped first
};

/// The links one aggregate stands for, summarised. A link's utilisation is its busier
/// direction's (GraphLink::maxUtilisation), as the full view colours it.
struct LinkStats {
  int links = 0;
  int used = 0;                ///< links with bytes in either direction
  double maxUtilisation = 0;   ///< over the links
  double meanUtilisation = 0;  ///< over the links, unused ones counted as 0
  double bytes = 0;            ///< both directions, all links
  double bwBytesPerS = 0;      ///< the largest one link's bandwidth per direction
  void add(const GraphLink& l);
  void finish();  ///< turns the running sum of utilisations into the mean
};

struct AggregateBox {
  QString label;  ///< "node3", "nodes 0–7", "leaf2", "leaf0 … leaf3", "spine"
  int firstHost = -1,
      lastHost = -1;       ///< the hosts it stands for (node hosts); -1: cluster switches
  std::vector<int> nodes;  ///< TopologyGraph node indices
  int devices = 0;         ///< compute nodes among them
  int firstRank = -1, lastRank = -1;  ///< the ranks they run (-1: none)
  int level = 0;                      ///< 0: hosts, 1: switches linked to hosts, 2: switches above
  std::vector<int> links;             ///< links with both ends in this box (NVLink, PCIe, ...)
  LinkStats inner;                    ///< of `links`
  QPointF pos;                        ///< in [0,1]²: hosts at the bottom, switches above
};

struct AggregateLine {
  int a = -1, b = -1;      ///< boxes, a < b
  QString kind;            ///< the links' kind ("ib")
  std::vector<int> links;  ///< TopologyGraph link indices
  LinkStats stats;
};

struct AggregatedTopology {
  int hosts = 0;                    ///< distinct hosts of the graph
  int hostsPerBox = 1;              ///< consecutive hosts per host box
  std::vector<AggregateBox> boxes;  ///< host boxes first (by host), then switch boxes
  std::vector<AggregateLine> lines;
  std::vector<int> boxOfNode;   ///< per graph node
  std::vector<int> lineOfLink;  ///< per graph link: its line, or -1 when it lies inside a box
  std::vector<int> boxOfLink;   ///< per graph link: its box, or -1 when it is on a line
};

/// True when `g` has more compute nodes than options.fullMaxDevices (and more than one host).
bool needsAggregation(const TopologyGraph& g, const AggregateOptions& options = {});
/// Every node in exactly one box, every link in exactly one box or line. O(nodes + links).
AggregatedTopology aggregateTopology(const TopologyGraph& g, const AggregateOptions& options = {});
/// The distinct hosts (≥ 0) of `g`, ascending.
std::vector<int> graphHosts(const TopologyGraph& g);

/// One host zoomed into: its nodes and every link touching them, with the nodes at the far end of
/// those links (the cluster switches) above, laid out as buildTopologyGraph lays out a topology.
struct HostView {
  TopologyGraph graph;
  std::vector<int> linkIds;  ///< per graph link: the index in the whole graph
  std::vector<int> nodeIds;  ///< per graph node: the index in the whole graph
};
HostView hostSubgraph(const TopologyGraph& g, int host);

}  // namespace tessera::studio
