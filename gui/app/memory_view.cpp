// MemoryView: stacked per-category peaks (sim's replayed MemStats), peak-of-total marker, capacity.
#include "memory_view.hpp"

#include <QHelpEvent>
#include <QStringList>
#include <QToolTip>

namespace tessera::studio {

namespace {
constexpr int kLeft = 80, kTop = 60, kBottom = 70, kRight = 200;
}

QRectF MemoryView::barRect(int i, int n) const {
  const double slot = static_cast<double>(width() - kLeft - kRight) / std::max(1, n);
  return QRectF(kLeft + i * slot + slot * 0.15, kTop, slot * 0.7, height() - kTop - kBottom);
}

void MemoryView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  if (paintMessage(p, rect())) return;
  p.fillRect(rect(), Qt::white);
  const std::vector<MemoryBar>& bars = shownBars();
  double maxStack = 1, maxCap = 0;
  bool anyOom = false;
  for (const MemoryBar& b : bars) {
    double s = 0;
    for (auto v : b.peakBytes) s += static_cast<double>(v);
    maxStack = std::max(maxStack, s);
    maxCap = std::max(maxCap, b.capacityBytes);
    anyOom = anyOom || b.oom();
  }
  // The scale shows the bars legibly; the capacity line is drawn where it falls inside it.
  top_ = anyOom ? std::max(maxStack, maxCap) * 1.1 : maxStack * 1.15;
  const double plotH = height() - kTop - kBottom;
  auto yOf = [&](double bytes) { return kTop + plotH * (1 - bytes / top_); };
  p.setPen(Qt::black);
  p.drawText(QRect(10, 8, width() - 20, 20), Qt::AlignLeft,
             QStringLiteral("Peak memory per device (replayed allocator bookings; bars stack each category's own "
                            "peak, the black tick is the peak of the total)"));
  for (int k = 0; k <= 4; ++k) {
    const double v = top_ * k / 4;
    p.setPen(QColor(220, 220, 220));
    p.drawLine(QPointF(kLeft, yOf(v)), QPointF(width() - kRight, yOf(v)));
    p.setPen(Qt::black);
    p.drawText(QRectF(0, yOf(v) - 8, kLeft - 6, 16), Qt::AlignRight | Qt::AlignVCenter, formatBytes(v));
  }
  const int n = static_cast<int>(bars.size());
  for (int i = 0; i < n; ++i) {
    const MemoryBar& b = bars[i];
    const QRectF slot = barRect(i, n);
    double base = 0;
    for (int c = 0; c < core::kNumMemCategories; ++c) {
      const double v = static_cast<double>(b.peakBytes[c]);
      if (v <= 0) continue;
      const QRectF r(slot.left(), yOf(base + v), slot.width(), yOf(base) - yOf(base + v));
      p.fillRect(r, categoryColor(c));
      base += v;
    }
    p.setPen(QPen(Qt::black, 2));
    const double yt = yOf(static_cast<double>(b.peakTotalBytes));
    p.drawLine(QPointF(slot.left() - 4, yt), QPointF(slot.right() + 4, yt));
    if (b.capacityBytes <= top_) {
      p.setPen(QPen(QColor(180, 30, 30), 2, Qt::DashLine));
      const double yc = yOf(b.capacityBytes);
      p.drawLine(QPointF(slot.left() - 6, yc), QPointF(slot.right() + 6, yc));
    }
    p.setPen(b.oom() ? QColor(180, 30, 30) : Qt::black);
    QFont f = p.font();
    f.setBold(b.oom());
    p.setFont(f);
    const QString rank = b.alike.empty()
                             ? QStringLiteral("rank %1").arg(b.rank)
                             : QStringLiteral("rank %1 +%2").arg(b.rank).arg(b.alike.size());
    const QString label =
        QStringLiteral("%1\n%2\n%3 of %4%5")
            .arg(rank, b.device, formatBytes(b.peakTotalBytes), formatBytes(b.capacityBytes),
                 b.oom() ? QStringLiteral("\nOOM") : QString());
    p.drawText(QRectF(slot.left() - 20, height() - kBottom + 4, slot.width() + 40, kBottom), Qt::AlignHCenter | Qt::AlignTop,
               label);
    f.setBold(false);
    p.setFont(f);
  }
  // Legend.
  int y = kTop;
  for (int c = 0; c < core::kNumMemCategories; ++c, y += 20) {
    p.fillRect(QRect(width() - kRight + 16, y, 14, 14), categoryColor(c));
    p.setPen(Qt::black);
    p.drawText(QPoint(width() - kRight + 36, y + 12), memCategoryLabel(c));
  }
  p.setPen(QPen(Qt::black, 2));
  p.drawLine(width() - kRight + 14, y + 7, width() - kRight + 32, y + 7);
  p.drawText(QPoint(width() - kRight + 36, y + 12), QStringLiteral("peak of total"));
  y += 20;
  p.setPen(QPen(QColor(180, 30, 30), 2, Qt::DashLine));
  p.drawLine(width() - kRight + 14, y + 7, width() - kRight + 32, y + 7);
  p.setPen(Qt::black);
  p.drawText(QPoint(width() - kRight + 36, y + 12), QStringLiteral("capacity"));
  if (!anyOom && maxCap > top_) {
    p.drawText(QRectF(width() - kRight + 14, y + 30, kRight - 20, 80), Qt::TextWordWrap,
               QStringLiteral("Capacity (%1) lies above this scale: every device fits.").arg(formatBytes(maxCap)));
  }
}

const std::vector<MemoryBar>& MemoryView::shownBars() const {
  return snap_->memoryGroups.empty() ? snap_->memory : snap_->memoryGroups;
}

bool MemoryView::event(QEvent* ev) {
  if (ev->type() != QEvent::ToolTip || !hasData()) return SnapshotView::event(ev);
  auto* he = static_cast<QHelpEvent*>(ev);
  const std::vector<MemoryBar>& bars = shownBars();
  const int n = static_cast<int>(bars.size());
  for (int i = 0; i < n; ++i) {
    if (!barRect(i, n).adjusted(-4, 0, 4, 0).contains(he->pos())) continue;
    const MemoryBar& b = bars[i];
    QString t = QStringLiteral("<b>rank %1</b> (%2)").arg(b.rank).arg(b.device);
    for (int c = 0; c < core::kNumMemCategories; ++c)
      t += QStringLiteral("<br>%1: %2").arg(memCategoryLabel(c), formatBytes(static_cast<double>(b.peakBytes[c])));
    t += QStringLiteral("<br>peak of total: %1 of %2%3")
             .arg(formatBytes(b.peakTotalBytes), formatBytes(b.capacityBytes), b.oom() ? QStringLiteral(" — OOM") : QString());
    if (!b.alike.empty()) {
      QStringList ranks;
      for (std::size_t k = 0; k < b.alike.size() && k < 16; ++k)
        ranks << QString::number(b.alike[k]);
      if (b.alike.size() > 16) ranks << QStringLiteral("…");
      t += QStringLiteral("<br>and %1 other ranks with these figures: %2")
               .arg(b.alike.size())
               .arg(ranks.join(", "));
    }
    QToolTip::showText(he->globalPos(), t, this);
    return true;
  }
  QToolTip::hideText();
  return true;
}

}  // namespace tessera::studio
