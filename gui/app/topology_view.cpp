// TopologyView: paints TopologyGraph (sim's topology, link use and routes) node by node, or, for a
// cluster, its AggregatedTopology (gui/model/topology_aggregate) with a host picker to zoom in.
#include "topology_view.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPushButton>
#include <QTextEdit>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <map>

namespace tessera::studio {

namespace {

/// Distance from `p` to the segment a–b.
double segmentDistance(QPointF p, QPointF a, QPointF b) {
  const QPointF ab = b - a;
  const double len2 = QPointF::dotProduct(ab, ab);
  const double t = len2 > 0 ? std::clamp(QPointF::dotProduct(p - a, ab) / len2, 0.0, 1.0) : 0;
  const QPointF q = a + t * ab;
  return std::hypot(p.x() - q.x(), p.y() - q.y());
}

QString percent(double u) { return QStringLiteral("%1%").arg(100 * u, 0, 'f', 1); }

QString statsText(const LinkStats& s) {
  return QStringLiteral("%1 links (%2 used), utilisation max %3, mean %4, %5 moved")
      .arg(s.links)
      .arg(s.used)
      .arg(percent(s.maxUtilisation), percent(s.meanUtilisation), formatBytes(s.bytes));
}

}  // namespace

class TopologyCanvas : public QWidget {
 public:
  explicit TopologyCanvas(TopologyView* v) : QWidget(v), view_(v) { setMouseTracking(true); }
  QPointF at(QPointF pos) const {
    return QPointF(30 + pos.x() * (width() - 60), 30 + pos.y() * (height() - 60));
  }
  /// Index into shownGraph()'s links, or -1.
  int linkAt(QPointF p) const {
    const TopologyGraph* g = view_->shownGraph();
    if (!g) return -1;
    int best = -1;
    double bestD = 6;
    for (int i = 0; i < static_cast<int>(g->links.size()); ++i) {
      const double d =
          segmentDistance(p, at(g->nodes[g->links[i].a].pos), at(g->nodes[g->links[i].b].pos));
      if (d < bestD) bestD = d, best = i;
    }
    return best;
  }
  /// A box's rectangle. When a row's boxes are narrower than their labels, every other one is
  /// drawn a box height higher, so that each can be twice as wide.
  QRectF boxRect(const AggregateBox& b) const {
    const AggregatedTopology& a = *view_->aggregate();
    int inRow = 0;
    for (const AggregateBox& o : a.boxes) inRow += o.level == b.level ? 1 : 0;
    const double spacing = (width() - 60.0) / std::max(1, inRow);
    const bool stagger = spacing < 80;
    const double w = std::clamp((stagger ? 2 : 1) * spacing - 6, 30.0, 150.0);
    const int k = static_cast<int>(std::lround(b.pos.x() * inRow - 0.5));
    const QPointF c = at(b.pos) - QPointF(0, stagger && k % 2 == 1 ? 56 : 0);
    return QRectF(c.x() - w / 2, c.y() - 25, w, 50);
  }
  QPointF boxCentre(int box) const { return boxRect(view_->aggregate()->boxes[box]).center(); }
  int boxAt(QPointF p) const {
    const AggregatedTopology* a = view_->aggregate();
    if (!a) return -1;
    for (int i = 0; i < static_cast<int>(a->boxes.size()); ++i)
      if (boxRect(a->boxes[i]).contains(p)) return i;
    return -1;
  }
  int lineAt(QPointF p) const {
    const AggregatedTopology* a = view_->aggregate();
    if (!a) return -1;
    int best = -1;
    double bestD = 6;
    for (int i = 0; i < static_cast<int>(a->lines.size()); ++i) {
      const double d = segmentDistance(p, boxCentre(a->lines[i].a), boxCentre(a->lines[i].b));
      if (d < bestD) bestD = d, best = i;
    }
    return best;
  }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    p.fillRect(rect(), Qt::white);
    const Snapshot* s = view_->snapshot();
    if (!s || !s->ok()) return;
    p.setRenderHint(QPainter::Antialiasing, true);
    if (const TopologyGraph* g = view_->shownGraph())
      paintGraph(p, *g);
    else
      paintAggregate(p, *view_->aggregate());
  }
  void paintGraph(QPainter& p, const TopologyGraph& g);
  void paintAggregate(QPainter& p, const AggregatedTopology& a);
  void mousePressEvent(QMouseEvent* e) override {
    if (view_->shownGraph()) {
      const int i = linkAt(e->position());
      view_->selectLink(i < 0 ? -1 : view_->wholeLink(i));
      return;
    }
    const int box = boxAt(e->position());
    if (box >= 0 && view_->aggregate()->boxes[box].firstHost >= 0)
      view_->zoomToHost(view_->aggregate()->boxes[box].firstHost);
    else
      view_->selectLine(lineAt(e->position()));
  }
  bool event(QEvent* e) override {
    if (e->type() != QEvent::ToolTip) return QWidget::event(e);
    auto* he = static_cast<QHelpEvent*>(e);
    const QString tip = tooltipAt(he->pos());
    if (tip.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(he->globalPos(), tip, this);
    return true;
  }
  QString tooltipAt(QPointF pos) const;

 private:
  TopologyView* view_;
};

void TopologyCanvas::paintGraph(QPainter& p, const TopologyGraph& g) {
  const int selected = view_->selectedLink();
  for (int i = 0; i < static_cast<int>(g.links.size()); ++i) {
    const GraphLink& l = g.links[i];
    const double u = l.maxUtilisation();
    const bool sel = view_->wholeLink(i) == selected;
    p.setPen(QPen(sel ? QColor(30, 30, 200) : utilisationColor(u),
                  sel ? 5 : 1.5 + 3 * std::min(1.0, u * 4)));
    const QPointF a = at(g.nodes[l.a].pos), b = at(g.nodes[l.b].pos);
    p.drawLine(a, b);
    if (u <= 0) continue;  // unused links: their bandwidth is in the legend below
    // Label the used link near its lower end, where the fan-out of a switch spreads the labels.
    const QPointF lower = a.y() > b.y() ? a : b, upper = a.y() > b.y() ? b : a;
    const QPointF c = lower + 0.3 * (upper - lower) - QPointF(0, 14.0 * (i % 3));
    p.setPen(QColor(40, 40, 40));
    p.drawText(QRectF(c.x() - 70, c.y() - 8, 140, 16), Qt::AlignCenter,
               QStringLiteral("%1 %2/s · %3%")
                   .arg(l.kind, formatBytes(l.bwBytesPerS))
                   .arg(100 * u, 0, 'f', 1));
  }
  std::map<QString, double> kinds;
  for (const GraphLink& l : g.links) kinds[l.kind] = std::max(kinds[l.kind], l.bwBytesPerS);
  QStringList legend;
  for (const auto& [k, bw] : kinds)
    legend << QStringLiteral("%1 up to %2/s").arg(k, formatBytes(bw));
  for (const GraphNode& n : g.nodes) {
    const QPointF c = at(n.pos);
    const bool compute = n.kind == QLatin1String("gpu") || n.kind == QLatin1String("cpu");
    const QRectF r(c.x() - 42, c.y() - 16, 84, 32);
    p.setPen(Qt::black);
    p.setBrush(compute ? (n.rank >= 0 ? rankColor(n.rank).lighter(150) : QColor(235, 235, 235))
                       : QColor(250, 240, 200));
    p.drawRoundedRect(r, 5, 5);
    const QString last = n.name.section('/', -1);
    p.drawText(r, Qt::AlignCenter,
               n.rank >= 0 ? QStringLiteral("%1\nrank %2").arg(last).arg(n.rank) : last);
  }
  p.setPen(Qt::black);
  const QString where =
      view_->zoomedHost() >= 0
          ? QStringLiteral(", host %1 and the switches it links to").arg(view_->zoomedHost())
          : QString();
  p.drawText(
      QRect(8, height() - 22, width() - 16, 20), Qt::AlignLeft,
      QStringLiteral(
          "%1%2 (%3 per direction). Colour: the busier direction's utilisation (grey: unused). "
          "Click a link for its transfers.")
          .arg(g.name, where, legend.join(", ")));
}

void TopologyCanvas::paintAggregate(QPainter& p, const AggregatedTopology& a) {
  const bool labels = a.lines.size() <= 40;
  for (int i = 0; i < static_cast<int>(a.lines.size()); ++i) {
    const AggregateLine& l = a.lines[i];
    const bool sel = i == view_->selectedLine();
    const double w = sel ? 5 : 1.5 + 3 * std::min(1.0, l.stats.meanUtilisation * 4);
    p.setPen(QPen(sel ? QColor(30, 30, 200) : utilisationColor(l.stats.maxUtilisation), w));
    const QPointF x = boxCentre(l.a), y = boxCentre(l.b);
    p.drawLine(x, y);
    if (!(labels || sel) || l.stats.maxUtilisation <= 0) continue;
    const QPointF c = x + 0.5 * (y - x);
    p.setPen(QColor(40, 40, 40));
    p.drawText(QRectF(c.x() - 70, c.y() - 8, 140, 16), Qt::AlignCenter,
               QStringLiteral("%1×%2 · max %3")
                   .arg(l.stats.links)
                   .arg(l.kind, percent(l.stats.maxUtilisation)));
  }
  QFont small = p.font();
  small.setPointSizeF(std::max(6.0, small.pointSizeF() - 2));
  p.setFont(small);
  for (const AggregateBox& b : a.boxes) {
    const QRectF r = boxRect(b);
    // The border carries the box's own links (NVLink, PCIe inside the hosts): their busiest.
    p.setPen(QPen(b.inner.links > 0 ? utilisationColor(b.inner.maxUtilisation) : QColor(Qt::black),
                  b.inner.links > 0 ? 3 : 1));
    p.setBrush(b.level == 0 ? (b.firstRank >= 0 ? rankColor(b.firstRank).lighter(160)
                                                : QColor(235, 235, 235))
                            : QColor(250, 240, 200));
    p.drawRoundedRect(r, 5, 5);
    QString text = b.label;
    if (b.devices > 0) text += QStringLiteral("\n%1 dev").arg(b.devices);
    if (b.firstRank >= 0) text += QStringLiteral("\nr%1–%2").arg(b.firstRank).arg(b.lastRank);
    p.setPen(Qt::black);
    p.drawText(r, Qt::AlignCenter | Qt::TextWrapAnywhere, text);
  }
  const auto hostBoxes = std::count_if(a.boxes.begin(), a.boxes.end(),
                                       [](const AggregateBox& b) { return b.level == 0; });
  p.drawText(
      QRect(8, height() - 40, width() - 16, 38), Qt::AlignLeft | Qt::TextWordWrap,
      QStringLiteral(
          "%1: %2 hosts drawn as %3 boxes of %4 host(s) and %5 switch boxes; %6 lines, each every "
          "link of one kind between two boxes. Colour: the busiest link's utilisation; width: the "
          "mean; a host box's border: its own links. Click a host box to zoom into its first host, "
          "a line for its figures.")
          .arg(view_->snapshot()->topology.name)
          .arg(a.hosts)
          .arg(hostBoxes)
          .arg(a.hostsPerBox)
          .arg(a.boxes.size() - hostBoxes)
          .arg(a.lines.size()));
}

QString TopologyCanvas::tooltipAt(QPointF pos) const {
  const Snapshot* s = view_->snapshot();
  if (!s || !s->ok()) return {};
  if (const TopologyGraph* g = view_->shownGraph()) {
    const int i = linkAt(pos);
    if (i < 0) return {};
    const GraphLink& l = g->links[i];
    return QStringLiteral("%1 ↔ %2 (%3, %4/s)\n→ %5, %6%\n← %7, %8%")
        .arg(g->nodes[l.a].name, g->nodes[l.b].name, l.kind, formatBytes(l.bwBytesPerS),
             formatBytes(l.bytes[0]))
        .arg(100 * l.utilisation[0], 0, 'f', 2)
        .arg(formatBytes(l.bytes[1]))
        .arg(100 * l.utilisation[1], 0, 'f', 2);
  }
  const AggregatedTopology& a = *view_->aggregate();
  if (const int b = boxAt(pos); b >= 0)
    return QStringLiteral("%1: %2 nodes, %3 devices; inside: %4%5")
        .arg(a.boxes[b].label)
        .arg(a.boxes[b].nodes.size())
        .arg(a.boxes[b].devices)
        .arg(statsText(a.boxes[b].inner),
             a.boxes[b].firstHost >= 0 ? QStringLiteral("\nclick to zoom in") : QString());
  if (const int l = lineAt(pos); l >= 0)
    return QStringLiteral("%1 ↔ %2 (%3): %4")
        .arg(a.boxes[a.lines[l].a].label, a.boxes[a.lines[l].b].label, a.lines[l].kind,
             statsText(a.lines[l].stats));
  return {};
}

TopologyView::TopologyView(QWidget* parent) : SnapshotView(parent) {
  canvas_ = new TopologyCanvas(this);
  details_ = new QTextEdit;
  details_->setReadOnly(true);
  details_->setMaximumWidth(340);
  details_->setPlaceholderText(
      QStringLiteral("Click a link to see the collectives and halo transfers routed over it."));
  hosts_ = new QComboBox;
  hosts_->setObjectName(QStringLiteral("hosts"));
  whole_ = new QPushButton(QStringLiteral("Whole cluster"));
  bar_ = new QWidget;
  auto* b = new QHBoxLayout(bar_);
  b->setContentsMargins(0, 0, 0, 0);
  b->addWidget(new QLabel(QStringLiteral("Show:")));
  b->addWidget(hosts_);
  b->addWidget(whole_);
  b->addStretch(1);
  auto* left = new QVBoxLayout;
  left->addWidget(bar_);
  left->addWidget(canvas_, 1);
  auto* h = new QHBoxLayout(this);
  h->addLayout(left, 1);
  h->addWidget(details_);
  connect(hosts_, &QComboBox::activated, this,
          [this](int i) { zoomToHost(hosts_->itemData(i).toInt()); });
  connect(whole_, &QPushButton::clicked, this, [this] { zoomToHost(-1); });
  bar_->setVisible(false);  // only for a cluster drawn aggregated
}

const TopologyGraph* TopologyView::shownGraph() const {
  if (!hasData()) return nullptr;
  if (zoomHost_ >= 0) return &zoom_.graph;
  return agg_ ? nullptr : &snap_->topology;
}

void TopologyView::showHostPicker() {
  bar_->setVisible(agg_ != nullptr);
  whole_->setEnabled(zoomHost_ >= 0);
  const int at = hosts_->findData(zoomHost_);
  if (at >= 0) hosts_->setCurrentIndex(at);
}

void TopologyView::snapshotChanged() {
  canvas_->setVisible(hasData());
  details_->setVisible(hasData());
  agg_ = nullptr;
  ownAgg_.reset();
  zoomHost_ = -1;
  zoom_ = {};
  selectedLine_ = -1;
  hosts_->clear();
  if (hasData() && needsAggregation(snap_->topology)) {
    // Built on the worker with the snapshot (simulate()); here only for one built without it.
    if (snap_->topologyAggregate)
      agg_ = &*snap_->topologyAggregate;
    else
      agg_ = &ownAgg_.emplace(aggregateTopology(snap_->topology));
    hosts_->addItem(QStringLiteral("whole cluster"), -1);
    for (int h : graphHosts(snap_->topology)) hosts_->addItem(QStringLiteral("host %1").arg(h), h);
  }
  showHostPicker();
  // Select the busiest link that carried halo traffic, so the panel starts with content.
  int busiest = -1;
  if (hasData())
    for (int i = 0; i < static_cast<int>(snap_->topology.links.size()); ++i) {
      const GraphLink& l = snap_->topology.links[i];
      if (!l.transfers.empty() &&
          (busiest < 0 || l.maxUtilisation() > snap_->topology.links[busiest].maxUtilisation()))
        busiest = i;
    }
  selectLink(busiest);
}

void TopologyView::zoomToHost(int host) {
  if (!agg_) return;
  zoomHost_ = host;
  zoom_ = host >= 0 ? hostSubgraph(snap_->topology, host) : HostView{};
  showHostPicker();
  canvas_->update();
}

void TopologyView::selectLine(int line) {
  selectedLine_ = agg_ && line >= 0 && line < static_cast<int>(agg_->lines.size()) ? line : -1;
  canvas_->update();
  if (selectedLine_ < 0) return;
  const AggregateLine& l = agg_->lines[selectedLine_];
  QString t = QStringLiteral("<b>%1 ↔ %2</b><br>%3 links of kind %4, up to %5/s per direction<br>")
                  .arg(agg_->boxes[l.a].label, agg_->boxes[l.b].label)
                  .arg(l.stats.links)
                  .arg(l.kind, formatBytes(l.stats.bwBytesPerS));
  t += QStringLiteral(
           "%1 used; utilisation max %2, mean %3; %4 moved (both directions)<br><br><b>Busiest "
           "links:</b><br>")
           .arg(l.stats.used)
           .arg(percent(l.stats.maxUtilisation), percent(l.stats.meanUtilisation),
                formatBytes(l.stats.bytes));
  std::vector<int> busiest = l.links;
  const auto& links = snap_->topology.links;
  const auto shown =
      busiest.begin() + std::min<std::ptrdiff_t>(20, static_cast<std::ptrdiff_t>(busiest.size()));
  std::partial_sort(busiest.begin(), shown, busiest.end(), [&](int x, int y) {
    return links[x].maxUtilisation() > links[y].maxUtilisation();
  });
  for (auto it = busiest.begin(); it != shown; ++it)
    t +=
        QStringLiteral("%1 ↔ %2: %3<br>")
            .arg(snap_->topology.nodes[links[*it].a].name, snap_->topology.nodes[links[*it].b].name)
            .arg(percent(links[*it].maxUtilisation()));
  details_->setHtml(t);
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
           .arg(formatBytes(l.bytes[0]))
           .arg(100 * l.utilisation[0], 0, 'f', 2)
           .arg(formatBytes(l.bytes[1]))
           .arg(100 * l.utilisation[1], 0, 'f', 2);
  const std::vector<LinkCollective> collectives = g.collectivesOf(link);
  t += QStringLiteral("<br><b>%1 collectives</b> (their algorithm's steps routed here):<br>")
           .arg(collectives.size());
  for (const LinkCollective& c : collectives)
    t += QStringLiteral("%1 %2 (%3, %4 ranks, %5): → %6, ← %7<br>")
             .arg(c.name, c.layer, c.algorithm)
             .arg(c.ranks)
             .arg(formatBytes(static_cast<double>(c.size)), formatBytes(c.bytes[0]),
                  formatBytes(c.bytes[1]));
  t += QStringLiteral("<br><b>%1 halo transfers</b> routed here:<br>").arg(l.transfers.size());
  int shown = 0;
  for (const LinkTransfer& x : l.transfers) {
    if (++shown > 300) {
      t += QStringLiteral("…");
      break;
    }
    t += QStringLiteral("rank %1 → %2 %3: %4<br>")
             .arg(x.fromRank)
             .arg(x.toRank)
             .arg(x.layer, formatBytes(x.bytes));
  }
  details_->setHtml(t);
}

void TopologyView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  paintMessage(p, rect());
}

}  // namespace tessera::studio
