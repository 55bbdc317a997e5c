// TopologyView: paints TopologyGraph (sim's topology, link use and routes).
#include "topology_view.hpp"

#include <QHBoxLayout>
#include <QHelpEvent>
#include <QMouseEvent>
#include <QTextEdit>
#include <QToolTip>
#include <cmath>
#include <map>

namespace tessera::studio {

class TopologyCanvas : public QWidget {
 public:
  explicit TopologyCanvas(TopologyView* v) : QWidget(v), view_(v) { setMouseTracking(true); }
  QPointF at(const GraphNode& n) const {
    return QPointF(30 + n.pos.x() * (width() - 60), 30 + n.pos.y() * (height() - 60));
  }
  int linkAt(QPointF p) const {
    const Snapshot* s = view_->snapshot();
    if (!s || !s->ok()) return -1;
    const TopologyGraph& g = s->topology;
    int best = -1;
    double bestD = 6;
    for (int i = 0; i < static_cast<int>(g.links.size()); ++i) {
      const QPointF a = at(g.nodes[g.links[i].a]), b = at(g.nodes[g.links[i].b]);
      const QPointF ab = b - a;
      const double len2 = QPointF::dotProduct(ab, ab);
      const double t = len2 > 0 ? std::clamp(QPointF::dotProduct(p - a, ab) / len2, 0.0, 1.0) : 0;
      const QPointF q = a + t * ab;
      const double d = std::hypot(p.x() - q.x(), p.y() - q.y());
      if (d < bestD) {
        bestD = d;
        best = i;
      }
    }
    return best;
  }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    p.fillRect(rect(), Qt::white);
    const Snapshot* s = view_->snapshot();
    if (!s || !s->ok()) return;
    const TopologyGraph& g = s->topology;
    p.setRenderHint(QPainter::Antialiasing, true);
    for (int i = 0; i < static_cast<int>(g.links.size()); ++i) {
      const GraphLink& l = g.links[i];
      const double u = l.maxUtilisation();
      const double w = i == view_->selectedLink() ? 5 : 1.5 + 3 * std::min(1.0, u * 4);
      p.setPen(QPen(i == view_->selectedLink() ? QColor(30, 30, 200) : utilisationColor(u), w));
      const QPointF a = at(g.nodes[l.a]), b = at(g.nodes[l.b]);
      p.drawLine(a, b);
      if (u <= 0) continue;  // unused links: their bandwidth is in the legend below
      // Label the used link near its lower end, where the fan-out of a switch spreads the labels.
      const QPointF lower = a.y() > b.y() ? a : b, upper = a.y() > b.y() ? b : a;
      const QPointF at = lower + 0.3 * (upper - lower) - QPointF(0, 14.0 * (i % 3));
      p.setPen(QColor(40, 40, 40));
      p.drawText(QRectF(at.x() - 70, at.y() - 8, 140, 16), Qt::AlignCenter,
                 QStringLiteral("%1 %2/s · %3%").arg(l.kind, formatBytes(l.bwBytesPerS)).arg(100 * u, 0, 'f', 1));
    }
    std::map<QString, double> kinds;
    for (const GraphLink& l : g.links) kinds[l.kind] = std::max(kinds[l.kind], l.bwBytesPerS);
    QStringList legend;
    for (const auto& [k, bw] : kinds) legend << QStringLiteral("%1 up to %2/s").arg(k, formatBytes(bw));
    for (const GraphNode& n : g.nodes) {
      const QPointF c = at(n);
      const bool compute = n.kind == QLatin1String("gpu") || n.kind == QLatin1String("cpu");
      const QRectF r(c.x() - 42, c.y() - 16, 84, 32);
      p.setPen(Qt::black);
      p.setBrush(compute ? (n.rank >= 0 ? rankColor(n.rank).lighter(150) : QColor(235, 235, 235)) : QColor(250, 240, 200));
      p.drawRoundedRect(r, 5, 5);
      const QString last = n.name.section('/', -1);
      p.drawText(r, Qt::AlignCenter, n.rank >= 0 ? QStringLiteral("%1\nrank %2").arg(last).arg(n.rank) : last);
    }
    p.setPen(Qt::black);
    p.drawText(QRect(8, height() - 22, width() - 16, 20), Qt::AlignLeft,
               QStringLiteral("%1 (%2 per direction). Colour: the busier direction's utilisation (grey: unused). "
                              "Click a link for its transfers.")
                   .arg(g.name, legend.join(", ")));
  }
  void mousePressEvent(QMouseEvent* e) override { view_->selectLink(linkAt(e->position())); }
  bool event(QEvent* e) override {
    if (e->type() != QEvent::ToolTip) return QWidget::event(e);
    auto* he = static_cast<QHelpEvent*>(e);
    const Snapshot* s = view_->snapshot();
    const int i = linkAt(he->pos());
    if (i < 0 || !s) {
      QToolTip::hideText();
      return true;
    }
    const GraphLink& l = s->topology.links[i];
    QToolTip::showText(he->globalPos(),
                       QStringLiteral("%1 ↔ %2 (%3, %4/s)\n→ %5, %6%\n← %7, %8%")
                           .arg(s->topology.nodes[l.a].name, s->topology.nodes[l.b].name, l.kind,
                                formatBytes(l.bwBytesPerS), formatBytes(l.bytes[0]))
                           .arg(100 * l.utilisation[0], 0, 'f', 2)
                           .arg(formatBytes(l.bytes[1]))
                           .arg(100 * l.utilisation[1], 0, 'f', 2),
                       this);
    return true;
  }

 private:
  TopologyView* view_;
};

TopologyView::TopologyView(QWidget* parent) : SnapshotView(parent) {
  canvas_ = new TopologyCanvas(this);
  details_ = new QTextEdit;
  details_->setReadOnly(true);
  details_->setMaximumWidth(340);
  details_->setPlaceholderText(QStringLiteral("Click a link to see the collectives and halo transfers routed over it."));
  auto* h = new QHBoxLayout(this);
  h->addWidget(canvas_, 1);
  h->addWidget(details_);
}

void TopologyView::snapshotChanged() {
  canvas_->setVisible(hasData());
  details_->setVisible(hasData());
  // Select the busiest link that carried halo traffic, so the panel starts with content.
  int busiest = -1;
  if (hasData())
    for (int i = 0; i < static_cast<int>(snap_->topology.links.size()); ++i) {
      const GraphLink& l = snap_->topology.links[i];
      if (!l.transfers.empty() && (busiest < 0 || l.maxUtilisation() > snap_->topology.links[busiest].maxUtilisation()))
        busiest = i;
    }
  selectLink(busiest);
}

void TopologyView::selectLink(int link) {
  selected_ = link;
  canvas_->update();
  if (!hasData() || link < 0 || link >= static_cast<int>(snap_->topology.links.size())) {
    details_->clear();
    return;
  }
  const TopologyGraph& g = snap_->topology;
  const GraphLink& l = g.links[link];
  QString t = QStringLiteral("<b>%1 ↔ %2</b><br>%3, %4/s per direction<br>")
                  .arg(g.nodes[l.a].name, g.nodes[l.b].name, l.kind, formatBytes(l.bwBytesPerS));
  t += QStringLiteral("→ %1 (%2% utilised)<br>← %3 (%4% utilised)<br>")
           .arg(formatBytes(l.bytes[0])).arg(100 * l.utilisation[0], 0, 'f', 2)
           .arg(formatBytes(l.bytes[1])).arg(100 * l.utilisation[1], 0, 'f', 2);
  t += QStringLiteral("<br><b>%1 collectives</b> (their algorithm's steps routed here):<br>").arg(l.collectives.size());
  for (const LinkCollective& c : l.collectives)
    t += QStringLiteral("%1 %2 (%3, %4 ranks, %5): → %6, ← %7<br>")
             .arg(c.name, c.layer, c.algorithm)
             .arg(c.ranks)
             .arg(formatBytes(static_cast<double>(c.size)), formatBytes(c.bytes[0]), formatBytes(c.bytes[1]));
  t += QStringLiteral("<br><b>%1 halo transfers</b> routed here:<br>").arg(l.transfers.size());
  int shown = 0;
  for (const LinkTransfer& x : l.transfers) {
    if (++shown > 300) {
      t += QStringLiteral("…");
      break;
    }
    t += QStringLiteral("rank %1 → %2 %3: %4<br>").arg(x.fromRank).arg(x.toRank).arg(x.layer, formatBytes(x.bytes));
  }
  details_->setHtml(t);
}

void TopologyView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  paintMessage(p, rect());
}

}  // namespace tessera::studio
