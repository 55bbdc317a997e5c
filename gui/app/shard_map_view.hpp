// Shard map: one activation (the model input, or any convolution's input through the layer
// slider) drawn as the grid of shards per rank, with the halo regions the convolution exchanges.
// Above kFullShardMapRanks ranks one data-parallel replica's shards are drawn (a replica picker
// chooses which), built when the layer or replica is shown.
#pragma once

#include "views_common.hpp"

class QSlider;
class QLabel;
class QSpinBox;

namespace tessera::studio {

class ShardCanvas;

class ShardMapView : public SnapshotView {
  Q_OBJECT
 public:
  explicit ShardMapView(QWidget* parent = nullptr);
  int layer() const { return layer_; }
  void setLayer(int layer);
  int replica() const { return replica_; }
  /// Shows data-parallel replica `replica` (only where the map is built per replica).
  void setReplica(int replica);
  /// The layer drawn: the snapshot's (a complete map) or the one built for the replica shown;
  /// null without data.
  const ShardLayer* shownLayer() const;

 protected:
  void snapshotChanged() override;
  void paintEvent(QPaintEvent*) override;

 private:
  void updateLabel();
  void buildShown();
  QSlider* slider_;
  QLabel* label_;
  QSpinBox* replicaBox_;
  ShardCanvas* canvas_;
  int layer_ = 0;
  int replica_ = 0;
  ShardLayer built_;  ///< layer_ for replica_, when the snapshot's map is not complete
};

}  // namespace tessera::studio
