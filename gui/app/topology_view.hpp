// Topology: the devices, switches and links of the cluster, links coloured by the simulated
// utilisation with their bandwidth; clicking a link lists the halo transfers routed over it.
#pragma once

#include "views_common.hpp"

class QTextEdit;

namespace tessera::studio {

class TopologyCanvas;

class TopologyView : public SnapshotView {
  Q_OBJECT
 public:
  explicit TopologyView(QWidget* parent = nullptr);
  /// Shows link `link`'s details and transfers (-1 clears).
  void selectLink(int link);
  int selectedLink() const { return selected_; }

 protected:
  void snapshotChanged() override;
  void paintEvent(QPaintEvent*) override;

 private:
  TopologyCanvas* canvas_;
  QTextEdit* details_;
  int selected_ = -1;
};

}  // namespace tessera::studio
