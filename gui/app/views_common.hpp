// Shared bits of the studio's views: colours per rank and per category, the "no data / error"
// placeholder painter, and the base class every view derives from.
#pragma once

#include <QColor>
#include <QPainter>
#include <QWidget>
#include <memory>

#include "simulation.hpp"

namespace tessera::studio {

/// A distinct colour for rank `rank`.
QColor rankColor(int rank);
/// Colour of a memory category (MemCategory order).
QColor categoryColor(int category);
/// Colour for a link utilisation in [0, 1] (grey when unused, green → red).
QColor utilisationColor(double u);

/// A view that shows one snapshot. When the snapshot is missing or holds an error, paintMessage()
/// draws the reason instead of stale or invented content.
class SnapshotView : public QWidget {
  Q_OBJECT
 public:
  using QWidget::QWidget;
  virtual void setSnapshot(std::shared_ptr<const Snapshot> s) {
    snap_ = std::move(s);
    snapshotChanged();
    update();
  }
  const Snapshot* snapshot() const { return snap_.get(); }
  bool hasData() const { return snap_ && snap_->ok(); }

 protected:
  virtual void snapshotChanged() {}
  /// Draws "simulating…" or the configuration's error over the whole widget; returns true when it
  /// did (the caller then draws nothing else).
  bool paintMessage(QPainter& p, const QRect& r) const;
  std::shared_ptr<const Snapshot> snap_;
};

}  // namespace tessera::studio
