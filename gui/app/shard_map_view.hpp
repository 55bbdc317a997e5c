// Shard map: one activation (the model input, or any convolution's input through the layer
// slider) drawn as the grid of shards per rank, with the halo regions the convolution exchanges.
#pragma once

#include "views_common.hpp"

class QSlider;
class QLabel;

namespace tessera::studio {

class ShardCanvas;

class ShardMapView : public SnapshotView {
  Q_OBJECT
 public:
  explicit ShardMapView(QWidget* parent = nullptr);
  int layer() const { return layer_; }
  void setLayer(int layer);

 protected:
  void snapshotChanged() override;
  void paintEvent(QPaintEvent*) override;

 private:
  void updateLabel();
  QSlider* slider_;
  QLabel* label_;
  ShardCanvas* canvas_;
  int layer_ = 0;
};

}  // namespace tessera::studio
