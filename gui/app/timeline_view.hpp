// Timeline: one compute lane and one communication lane per device, the simulator's events on a
// zoomable, pannable time axis (TimeAxis), halo sends joined to their receives by arrows. Folded
// (large meshes): lanes for the simulated ranks, each labelled with how many ranks it stands for.
// With micro-batches, kernels take their micro-batch's colour (a legend says which); with pipeline
// stages, lanes name the rank's stage and transfers between stages are drawn as bold arrows.
#pragma once

#include "views_common.hpp"

namespace tessera::studio {

class TimelineView : public SnapshotView {
  Q_OBJECT
 public:
  explicit TimelineView(QWidget* parent = nullptr);
  static constexpr int kLabelWidth = 120;
  static constexpr int kMirrorsWidth = 50;  ///< added to the labels for the "+1023" of folded lanes
  static constexpr int kStageWidth = 30;    ///< added to the labels for " · stage 1"
  /// The lane labels' width: kLabelWidth, plus kMirrorsWidth when lanes stand for other ranks and
  /// kStageWidth when they name pipeline stages.
  int labelWidth() const { return labelWidth_; }
  static constexpr int kRulerHeight = 26;
  static constexpr int kLaneHeight = 22;
  const TimeAxis& axis() const { return axis_; }
  /// The event under a widget point, or -1.
  int eventAt(QPoint p) const;
  /// An event's fill: with `byMicro` a kernel of a micro-batch takes that micro-batch's colour
  /// (its backward darker), every other event the colour of its kind (conv, backward, halo, ...).
  static QColor eventColor(const TimelineEvent& e, bool byMicro);
  /// The colour of micro-batch `micro` (a qualitative palette, repeating after ten).
  static QColor microBatchColor(int micro);

 protected:
  void snapshotChanged() override;
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseDoubleClickEvent(QMouseEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  bool event(QEvent*) override;

 private:
  void fit();
  TimeAxis axis_;
  bool fitted_ = false;
  int labelWidth_ = kLabelWidth;
  QPoint dragFrom_;
  bool dragging_ = false;
};

}  // namespace tessera::studio
