// TimelineView: paints TimelineData through TimeAxis; wheel zooms about the cursor, drag pans,
// double-click fits the iteration; tooltips name op, layer, micro-batch, bytes and duration.
#include "timeline_view.hpp"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

namespace tessera::studio {

QColor TimelineView::microBatchColor(int micro) {
  // No red: red outlines the critical path.
  static const QColor palette[] = {
      {78, 121, 167}, {242, 142, 43},  {89, 161, 79},  {148, 103, 189}, {118, 183, 178},
      {237, 201, 72}, {176, 122, 161}, {23, 190, 207}, {156, 117, 95},  {186, 176, 172}};
  return palette[(micro < 0 ? 0 : micro) % 10];
}

QColor TimelineView::eventColor(const TimelineEvent& e, bool byMicro) {
  if (e.cat == QLatin1String("halo"))  // transfers between pipeline stages apart from halos
    return e.pipeline() ? QColor(200, 40, 120) : QColor(242, 142, 43);
  if (byMicro && e.micro >= 0 && e.cat == QLatin1String("compute")) {
    const QColor c = microBatchColor(e.micro);
    return e.op.contains(QLatin1String("backward")) ? c.darker(140) : c;
  }
  if (e.cat == QLatin1String("comm")) return QColor(89, 161, 79);
  if (e.op.contains(QLatin1String("backward"))) return QColor(156, 117, 197);
  if (e.op.startsWith(QLatin1String("conv2d"))) return QColor(78, 121, 167);
  if (e.op.contains(QLatin1String("adamw")) || e.op.contains(QLatin1String("sgd"))) return QColor(186, 176, 172);
  return QColor(118, 183, 178);
}

namespace {

/// Micro-batch legend, right-aligned at `right` on the ruler: a swatch per micro-batch (at most
/// ten; the palette repeats). Returns where it begins, for what is drawn left of it.
int drawMicroLegend(QPainter& p, int right, int micro) {
  const int shown = std::min(micro, 10);
  const QString text = QStringLiteral("micro-batch (backward darker):");
  const int tw = p.fontMetrics().horizontalAdvance(text);
  const int left = right - tw - 6 - shown * 24;
  p.fillRect(QRect(left - 4, 3, right - left + 4, 18), Qt::white);
  p.setPen(Qt::black);
  p.drawText(QPointF(left, 16), text);
  for (int m = 0; m < shown; ++m) {
    const QRect box(left + tw + 6 + m * 24, 6, 20, 13);
    p.fillRect(box, TimelineView::microBatchColor(m));
    p.setPen(Qt::white);
    p.drawText(box, Qt::AlignCenter, QString::number(m));
  }
  return left - 12;
}

}  // namespace

TimelineView::TimelineView(QWidget* parent) : SnapshotView(parent) {
  setMouseTracking(true);
  setMinimumHeight(200);
}

void TimelineView::fit() {
  if (!hasData()) return;
  axis_ = TimeAxis::fit(snap_->timeline.endPs, std::max(50, width() - labelWidth() - 10));
}

void TimelineView::snapshotChanged() {
  fitted_ = false;
  labelWidth_ = kLabelWidth;
  if (!hasData()) return;
  for (const TimelineLane& l : snap_->timeline.lanes)
    if (l.mirrors > 0) labelWidth_ = kLabelWidth + kMirrorsWidth;
  if (snap_->timeline.stages > 0) labelWidth_ += kStageWidth;
}

void TimelineView::resizeEvent(QResizeEvent*) {
  if (!fitted_) fit();
}

int TimelineView::eventAt(QPoint p) const {
  if (!hasData() || p.x() < labelWidth() || p.y() < kRulerHeight) return -1;
  const int lane = (p.y() - kRulerHeight) / kLaneHeight;
  const TimelineData& d = snap_->timeline;
  if (lane >= static_cast<int>(d.lanes.size())) return -1;
  // A pixel covers [t0, t1): pick the event that overlaps it, preferring the longest.
  const sim::Picos t0 = axis_.timeAt(p.x() - labelWidth()),
                   t1 = axis_.timeAt(p.x() - labelWidth() + 1);
  int best = -1;
  for (int i = 0; i < static_cast<int>(d.events.size()); ++i) {
    const TimelineEvent& e = d.events[i];
    if (e.lane != lane || e.startPs >= t1 || e.endPs() < t0) continue;
    if (best < 0 || e.durPs > d.events[best].durPs) best = i;
  }
  return best;
}

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  if (paintMessage(p, rect())) return;
  if (!fitted_) fit();  // until the user zooms or pans, the whole iteration fills the width
  p.fillRect(rect(), Qt::white);
  const TimelineData& d = snap_->timeline;
  const int plotW = width() - labelWidth();
  const bool byMicro = d.microBatches > 1;
  // Ruler: about one tick per 120 pixels, at round times.
  p.setPen(Qt::black);
  const double span = static_cast<double>(axis_.psPerPixel()) * 120;
  const double mag = std::pow(10.0, std::floor(std::log10(std::max(span, 1.0))));
  const double step = span / mag < 2 ? mag * 2 : span / mag < 5 ? mag * 5 : mag * 10;
  const sim::Picos first = static_cast<sim::Picos>(std::floor(axis_.timeAt(0) / step) * step);
  for (double t = static_cast<double>(first); axis_.x(static_cast<sim::Picos>(t)) < plotW; t += step) {
    const double x = labelWidth() + axis_.x(static_cast<sim::Picos>(t));
    if (x < labelWidth()) continue;
    p.setPen(QColor(225, 225, 225));
    p.drawLine(QPointF(x, kRulerHeight), QPointF(x, height()));
    p.setPen(Qt::black);
    p.drawText(QPointF(x + 2, 16), formatPs(static_cast<sim::Picos>(t)));
  }
  // Lanes.
  for (int i = 0; i < static_cast<int>(d.lanes.size()); ++i) {
    const int y = kRulerHeight + i * kLaneHeight;
    if (i % 4 >= 2) p.fillRect(QRect(0, y, width(), kLaneHeight), QColor(246, 246, 250));
    p.setPen(Qt::black);
    p.drawText(QRect(4, y, labelWidth() - 8, kLaneHeight), Qt::AlignVCenter | Qt::AlignLeft,
               d.lanes[i].label);
    if (d.lanes[i].mirrors > 0) {  // folded: this lane also stands for the ranks the same as it
      p.setPen(Qt::darkGray);
      p.drawText(QRect(4, y, labelWidth() - 8, kLaneHeight), Qt::AlignVCenter | Qt::AlignRight,
                 QStringLiteral("+%1").arg(d.lanes[i].mirrors));
    }
  }
  p.setClipRect(QRect(labelWidth(), kRulerHeight, plotW, height() - kRulerHeight));
  auto laneY = [&](int lane) { return kRulerHeight + lane * kLaneHeight; };
  for (const TimelineEvent& e : d.events) {
    const double x0 = axis_.x(e.startPs), x1 = axis_.x(e.endPs());
    if (x1 < 0 || x0 > plotW) continue;
    const QRectF r(labelWidth() + x0, laneY(e.lane) + 3, std::max(1.0, x1 - x0), kLaneHeight - 6);
    if (e.cat == QLatin1String("wait")) {
      // Time blocked in wait() (core/tracing.hpp): hatched, so it never reads as data moving.
      p.fillRect(r, QBrush(QColor(120, 120, 120), Qt::BDiagPattern));
      p.setPen(QPen(QColor(120, 120, 120), 1));
      p.drawRect(r);
      continue;
    }
    p.fillRect(r, eventColor(e, byMicro));
    if (e.critical) {  // the critical path (sim::SimResult::critical_path): outlined in red
      p.setPen(QPen(QColor(215, 25, 28), 2));
      p.drawRect(r.adjusted(-1, -2, 1, 2));
    }
    if (r.width() > 60) {
      p.setPen(Qt::white);
      const QString text = e.layer.isEmpty() ? e.name : e.layer;
      p.drawText(r.adjusted(2, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft,
                 e.micro >= 0 ? QStringLiteral("m%1 %2").arg(e.micro).arg(text) : text);
    }
  }
  // Legends of the critical path and of the micro-batches, top right of the ruler.
  p.setClipping(false);
  const auto& path = snap_->result.critical_path;
  int legendRight = width() - 4;
  if (!path.empty()) {
    const QString text = QStringLiteral("critical path: %1 ops, red outline").arg(path.size());
    const int tw = p.fontMetrics().horizontalAdvance(text);
    p.fillRect(QRect(width() - tw - 30, 3, tw + 26, 18), Qt::white);
    p.setPen(QPen(QColor(215, 25, 28), 2));
    p.drawRect(QRect(width() - tw - 26, 7, 14, 10));
    p.setPen(Qt::black);
    p.drawText(QPointF(width() - tw - 6, 16), text);
    legendRight = width() - tw - 36;
  }
  if (byMicro) drawMicroLegend(p, legendRight, d.microBatches);
  p.setClipRect(QRect(labelWidth(), kRulerHeight, plotW, height() - kRulerHeight));
  // Halo arrows: from the start of a send to the end of its receive; transfers between pipeline
  // stages (activations forward, gradients back) bold.
  p.setRenderHint(QPainter::Antialiasing, true);
  const QPen haloPen(QColor(200, 60, 20, 160), 1), stagePen(QColor(200, 40, 120, 220), 2);
  int drawn = 0;
  for (const TimelineArrow& a : d.arrows) {
    const TimelineEvent& s = d.events[a.from];
    const TimelineEvent& r = d.events[a.to];
    p.setPen(s.pipeline() ? stagePen : haloPen);
    const double xs = axis_.x(s.startPs), xr = axis_.x(r.endPs());
    if ((xs < 0 && xr < 0) || (xs > plotW && xr > plotW)) continue;
    if (++drawn > 2000) break;
    const QPointF from(labelWidth() + xs, laneY(s.lane) + kLaneHeight / 2.0);
    const QPointF to(labelWidth() + xr, laneY(r.lane) + kLaneHeight / 2.0);
    p.drawLine(from, to);
    const QPointF dir = from - to;
    const double len = std::hypot(dir.x(), dir.y());
    if (len > 6) {
      const QPointF u = dir / len, n(-u.y(), u.x());
      p.drawLine(to, to + 5 * u + 3 * n);
      p.drawLine(to, to + 5 * u - 3 * n);
    }
  }
}

void TimelineView::wheelEvent(QWheelEvent* e) {
  if (!hasData()) return;
  const double steps = e->angleDelta().y() / 120.0;
  axis_.zoom(std::pow(1.25, steps), e->position().x() - labelWidth());
  fitted_ = true;
  update();
}

void TimelineView::mousePressEvent(QMouseEvent* e) {
  dragging_ = e->button() == Qt::LeftButton;
  dragFrom_ = e->pos();
}

void TimelineView::mouseMoveEvent(QMouseEvent* e) {
  if (!dragging_ || !(e->buttons() & Qt::LeftButton)) return;
  axis_.pan(dragFrom_.x() - e->pos().x());
  fitted_ = true;
  dragFrom_ = e->pos();
  update();
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent*) {
  fitted_ = false;
  update();
}

bool TimelineView::event(QEvent* ev) {
  if (ev->type() != QEvent::ToolTip) return SnapshotView::event(ev);
  auto* he = static_cast<QHelpEvent*>(ev);
  const int lane = (he->pos().y() - kRulerHeight) / kLaneHeight;
  if (hasData() && he->pos().x() < labelWidth() && he->pos().y() >= kRulerHeight &&
      lane < static_cast<int>(snap_->timeline.lanes.size())) {
    const TimelineLane& l = snap_->timeline.lanes[lane];
    QString t = l.label;
    if (l.stage >= 0)
      t += QStringLiteral("<br>pipeline stage %1 of %2 (its coordinate on the mesh dim pp)")
               .arg(l.stage)
               .arg(snap_->timeline.stages);
    if (l.mirrors > 0)
      t += QStringLiteral("<br>also %1 other ranks: the same as rank %2 (simulated once)")
               .arg(l.mirrors)
               .arg(l.rank);
    QToolTip::showText(he->globalPos(), t, this);
    return true;
  }
  const int i = eventAt(he->pos());
  if (i < 0) {
    QToolTip::hideText();
    return true;
  }
  const TimelineEvent& e = snap_->timeline.events[i];
  QString t = QStringLiteral("<b>%1</b> (%2)<br>layer %3<br>start %4, duration %5")
                  .arg(e.op.isEmpty() ? e.name : e.op, e.cat, e.layer.isEmpty() ? QStringLiteral("-") : e.layer,
                       formatPs(e.startPs), formatPs(e.durPs));
  if (e.bytes >= 0) t += QStringLiteral("<br>bytes %1").arg(formatBytes(e.bytes));
  if (e.flops >= 0) t += QStringLiteral("<br>flops %1").arg(e.flops, 0, 'g', 4);
  if (e.micro >= 0) t += QStringLiteral("<br>micro-batch %1").arg(e.micro);
  if (e.peer >= 0) t += QStringLiteral("<br>peer rank %1").arg(e.peer);
  if (e.critical) t += QStringLiteral("<br><b>on the critical path</b>");
  QToolTip::showText(he->globalPos(), t, this);
  return true;
}

}  // namespace tessera::studio
