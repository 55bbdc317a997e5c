// Topology: the devices, switches and links of the cluster, links coloured by the simulated
// utilisation with their bandwidth; clicking a link lists the halo transfers routed over it.
// Above AggregateOptions::fullMaxDevices devices the cluster is drawn aggregated (host boxes,
// switch boxes, one line per pair of boxes and link kind); a host can be zoomed into and drawn
// whole, with "Whole cluster" to go back.
#pragma once

#include <optional>

#include "topology_aggregate.hpp"
#include "views_common.hpp"

class QComboBox;
class QPushButton;
class QTextEdit;

namespace tessera::studio {

class TopologyCanvas;

class TopologyView : public SnapshotView {
  Q_OBJECT
 public:
  explicit TopologyView(QWidget* parent = nullptr);
  /// Shows link `link`'s details and transfers (-1 clears); an index of the whole graph.
  void selectLink(int link);
  int selectedLink() const { return selected_; }
  /// Shows aggregated line `line`'s figures (-1 clears).
  void selectLine(int line);
  int selectedLine() const { return selectedLine_; }
  /// Zooms into host `host` (its nodes and links drawn whole); -1: the whole cluster.
  void zoomToHost(int host);
  int zoomedHost() const { return zoomHost_; }
  /// The aggregation of the current snapshot, or null when the topology is drawn whole.
  const AggregatedTopology* aggregate() const { return agg_; }
  /// The graph drawn node by node: the whole topology, or the zoomed host; null while the
  /// aggregated cluster is shown.
  const TopologyGraph* shownGraph() const;
  /// The whole graph's index of link `i` of shownGraph().
  int wholeLink(int i) const { return zoomHost_ >= 0 ? zoom_.linkIds[i] : i; }

 protected:
  void snapshotChanged() override;
  void paintEvent(QPaintEvent*) override;

 private:
  void showHostPicker();
  TopologyCanvas* canvas_;
  QTextEdit* details_;
  QWidget* bar_;
  QComboBox* hosts_;
  QPushButton* whole_;
  const AggregatedTopology* agg_ = nullptr;   ///< the snapshot's, or ownAgg_
  std::optional<AggregatedTopology> ownAgg_;  ///< for a snapshot built without one
  int zoomHost_ = -1;
  HostView zoom_;
  int selected_ = -1;
  int selectedLine_ = -1;
};

}  // namespace tessera::studio
