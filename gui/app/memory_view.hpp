// Memory: per device, the replayed peak bytes of each category stacked, the peak of the total
// marked, against the device's capacity; a device over capacity is labelled OOM. Above
// kMemoryBarsMax devices one bar per group of devices with equal figures ("rank 0 +1023").
#pragma once

#include "views_common.hpp"

namespace tessera::studio {

class MemoryView : public SnapshotView {
  Q_OBJECT
 public:
  using SnapshotView::SnapshotView;

 protected:
  void paintEvent(QPaintEvent*) override;
  bool event(QEvent*) override;

 private:
  QRectF barRect(int i, int n) const;
  /// The snapshot's grouped bars when it has them, else one per rank.
  const std::vector<MemoryBar>& shownBars() const;
  double top_ = 1;
};

}  // namespace tessera::studio
