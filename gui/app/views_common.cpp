// Colours and the message placeholder shared by the views.
#include "views_common.hpp"

namespace tessera::studio {

QColor rankColor(int rank) {
  static const QColor palette[] = {QColor(31, 119, 180), QColor(255, 127, 14), QColor(44, 160, 44),
                                   QColor(214, 39, 40),  QColor(148, 103, 189), QColor(140, 86, 75),
                                   QColor(227, 119, 194), QColor(127, 127, 127), QColor(188, 189, 34),
                                   QColor(23, 190, 207)};
  return palette[((rank % 10) + 10) % 10];
}

QColor categoryColor(int c) {
  static const QColor palette[] = {QColor(78, 121, 167), QColor(242, 142, 43), QColor(225, 87, 89),
                                   QColor(118, 183, 178), QColor(237, 201, 72), QColor(176, 122, 161)};
  return palette[((c % 6) + 6) % 6];
}

QColor utilisationColor(double u) {
  if (u <= 0) return QColor(170, 170, 170);
  const double t = std::min(1.0, std::max(0.0, u));
  // Green at low utilisation, through yellow, to red at full; faint loads stay visibly green.
  const double hue = 120.0 * (1.0 - std::min(1.0, 0.15 + t));
  return QColor::fromHsvF(hue / 360.0, 0.85, 0.85);
}

bool SnapshotView::paintMessage(QPainter& p, const QRect& r) const {
  QString text;
  if (!snap_) text = QStringLiteral("Simulating…");
  else if (!snap_->ok()) text = QStringLiteral("Configuration error:\n\n") + snap_->error;
  else return false;
  p.fillRect(r, palette().base());
  p.setPen(snap_ ? QColor(180, 30, 30) : palette().text().color());
  p.drawText(r.adjusted(20, 20, -20, -20), Qt::AlignCenter | Qt::TextWordWrap, text);
  return true;
}

}  // namespace tessera::studio
