// ShardMapView: paints ShardMap (core's layouts and halo plans) — own part per rank, the halo
// regions each rank receives outlined in its colour, with widths in pixels and bytes. With pipeline
// stages, a layer shows the ranks of the stage that runs it, each labelled with its stage.
#include "shard_map_view.hpp"

#include <QHelpEvent>
#include <QLabel>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QToolTip>
#include <QVBoxLayout>
#include <map>

namespace tessera::studio {

namespace {

QString shapeText(const core::Shape& s) {
  QStringList p;
  for (auto v : s) p << QString::number(v);
  return p.join(QStringLiteral("×"));
}

QString coordsText(const std::vector<int>& c) {
  QStringList p;
  for (int v : c) p << QString::number(v);
  return QStringLiteral("(") + p.join(',') + QStringLiteral(")");
}

/// "3 px wide" for a halo that spans the shard's height, "3×5 px" otherwise.
QString haloSize(const nn::Box& b, const nn::Box& own) {
  const auto h = b.r[2].size(), w = b.r[3].size();
  if (h == own.r[2].size()) return QStringLiteral("%1 px wide").arg(w);
  if (w == own.r[3].size()) return QStringLiteral("%1 px high").arg(h);
  return QStringLiteral("%1×%2 px").arg(h).arg(w);
}

}  // namespace

/// The drawing area of the shard map (hover tooltips come from here).
class ShardCanvas : public QWidget {
 public:
  explicit ShardCanvas(ShardMapView* view) : QWidget(view), view_(view) { setMouseTracking(true); }
  const ShardLayer* layer() const { return view_->shownLayer(); }
  const ShardMap& map() const { return view_->snapshot()->shards; }
  /// Whether `s`'s rank runs the shown layer: with pipeline stages, only the ranks of its stage.
  bool runs(const ShardInfo& s) const {
    const ShardLayer* l = layer();
    return !l || l->stage < 0 || map().stageOf(s.rank) == l->stage;
  }
  /// One panel per data-parallel slice (distinct batch range), stacked vertically.
  std::vector<std::pair<std::int64_t, PlaneGeometry>> panels() const {
    std::vector<std::pair<std::int64_t, PlaneGeometry>> out;
    const ShardLayer* l = layer();
    if (!l) return out;
    std::map<std::int64_t, int> slices;
    for (const ShardInfo& s : l->shards)
      if (runs(s)) slices.emplace(s.own.r[0].begin, 0);
    const int n = static_cast<int>(slices.size());
    const QRectF all = QRectF(rect()).adjusted(12, 12, -12, -150);
    const double h = all.height() / n;
    int i = 0;
    for (auto& [begin, unused] : slices) {
      PlaneGeometry g;
      g.area = QRectF(all.left(), all.top() + i * h, all.width(), h - 18);
      g.height = l->shape[2];
      g.width = l->shape[3];
      out.emplace_back(begin, g);
      ++i;
    }
    return out;
  }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    p.fillRect(rect(), Qt::white);
    const ShardLayer* l = layer();
    if (!l) return;
    p.setRenderHint(QPainter::Antialiasing, false);
    const auto ps = panels();
    for (const auto& [nBegin, g] : ps) {
      for (const ShardInfo& s : l->shards) {
        if (s.own.r[0].begin != nBegin || !runs(s)) continue;
        const QRectF r = g.rectOf(s.own);
        QColor fill = rankColor(s.rank);
        fill.setAlpha(60);
        p.fillRect(r, fill);
        p.setPen(QPen(rankColor(s.rank).darker(130), 1.5));
        p.drawRect(r);
      }
      // Halo regions: where each rank's received pieces lie (inside the sender's part), hatched in
      // the receiver's colour; at least 3 pixels wide so a one-column halo stays visible.
      for (const ShardInfo& s : l->shards) {
        if (s.own.r[0].begin != nBegin || !runs(s)) continue;
        for (const HaloRegion& h : s.recvs) {
          QRectF r = g.rectOf(h.box);
          if (r.width() < 3) r.adjust(-(3 - r.width()) / 2, 0, (3 - r.width()) / 2, 0);
          if (r.height() < 3) r.adjust(0, -(3 - r.height()) / 2, 0, (3 - r.height()) / 2);
          QColor c = rankColor(s.rank);
          p.fillRect(r, QBrush(c, Qt::BDiagPattern));
          c.setAlpha(150);
          p.fillRect(r, c);
        }
      }
      p.setPen(Qt::black);
      for (const ShardInfo& s : l->shards) {
        if (s.own.r[0].begin != nBegin || !runs(s)) continue;
        const QRectF r = g.rectOf(s.own);
        const int stage = map().stageOf(s.rank);
        const QString stageText = stage >= 0 ? QStringLiteral(" · stage %1").arg(stage) : QString();
        const QString text = QStringLiteral("rank %1 %2%3\n%4×%5")
                                 .arg(s.rank)
                                 .arg(coordsText(s.coords), stageText)
                                 .arg(s.own.r[2].size())
                                 .arg(s.own.r[3].size());
        p.drawText(r.adjusted(4, 4, -4, -4), Qt::AlignCenter | Qt::TextWordWrap, text);
      }
      p.drawText(QRectF(g.area.left(), g.area.top() + g.height * g.scale() + 2, g.area.width(), 16), Qt::AlignLeft,
                 QStringLiteral("batch [%1, …)  —  plane H×W = %2×%3").arg(nBegin).arg(l->shape[2]).arg(l->shape[3]));
    }
    // Legend: what each rank receives, widths in pixels and bytes.
    QStringList lines;
    for (const ShardInfo& s : l->shards) {
      if (s.recvs.empty() || !runs(s)) continue;
      QStringList parts;
      for (const HaloRegion& h : s.recvs)
        parts << QStringLiteral("from %1: %2, %3").arg(h.peer).arg(haloSize(h.box, s.own), formatBytes(h.bytes));
      lines << QStringLiteral("rank %1 receives %2").arg(s.rank).arg(parts.join(QStringLiteral("; ")));
      if (lines.size() >= 7) {
        lines << QStringLiteral("… (hover a shard for the rest)");
        break;
      }
    }
    if (lines.isEmpty()) lines << QStringLiteral("No halo exchange for this convolution (pointwise, or aligned shards).");
    p.drawText(QRectF(12, height() - 140, width() - 24, 135), Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap,
               lines.join('\n'));
  }

  bool event(QEvent* e) override {
    if (e->type() != QEvent::ToolTip) return QWidget::event(e);
    auto* he = static_cast<QHelpEvent*>(e);
    const ShardLayer* l = layer();
    if (!l) return true;
    for (const auto& [nBegin, g] : panels()) {
      const auto [row, col] = g.elementAt(he->pos());
      if (row < 0) continue;
      for (const ShardInfo& s : l->shards) {
        if (s.own.r[0].begin != nBegin || !runs(s) || row < s.own.r[2].begin ||
            row >= s.own.r[2].end || col < s.own.r[3].begin || col >= s.own.r[3].end)
          continue;
        QString t = QStringLiteral("<b>rank %1</b> mesh coords %2<br>local shape %3 (N×C×H×W)<br>reads %4")
                        .arg(s.rank).arg(coordsText(s.coords), shapeText(s.own.shape()), shapeText(s.need.shape()));
        const int stage = map().stageOf(s.rank);
        if (stage >= 0)
          t += QStringLiteral("<br>pipeline ") + map().stageText(stage).toHtmlEscaped();
        for (const HaloRegion& h : s.recvs)
          t += QStringLiteral("<br>receives from %1: %2, %3").arg(h.peer).arg(haloSize(h.box, s.own), formatBytes(h.bytes));
        for (const HaloRegion& h : s.sends)
          t += QStringLiteral("<br>sends to %1: %2, %3").arg(h.peer).arg(haloSize(h.box, s.own), formatBytes(h.bytes));
        QToolTip::showText(he->globalPos(), t, this);
        return true;
      }
    }
    QToolTip::hideText();
    return true;
  }

 private:
  ShardMapView* view_;
};

ShardMapView::ShardMapView(QWidget* parent) : SnapshotView(parent) {
  slider_ = new QSlider(Qt::Horizontal);
  slider_->setRange(0, 0);
  label_ = new QLabel;
  label_->setWordWrap(true);
  replicaBox_ = new QSpinBox;
  replicaBox_->setObjectName("replica");
  replicaBox_->setPrefix(QStringLiteral("data-parallel replica "));
  replicaBox_->setVisible(false);
  canvas_ = new ShardCanvas(this);
  auto* v = new QVBoxLayout(this);
  v->addWidget(label_);
  auto* row = new QHBoxLayout;
  row->addWidget(slider_, 1);
  row->addWidget(replicaBox_);
  v->addLayout(row);
  v->addWidget(canvas_, 1);
  connect(slider_, &QSlider::valueChanged, this, [this](int v) { setLayer(v); });
  connect(replicaBox_, &QSpinBox::valueChanged, this, [this](int v) { setReplica(v); });
}

const ShardLayer* ShardMapView::shownLayer() const {
  if (!hasData() || snap_->shards.layers.empty()) return nullptr;
  if (!snap_->shards.complete()) return &built_;
  return &snap_->shards.layers[std::min<std::size_t>(layer_, snap_->shards.layers.size() - 1)];
}

void ShardMapView::buildShown() {
  built_ = {};
  if (!hasData() || snap_->shards.layers.empty() || snap_->shards.complete()) return;
  // A few halo plans (one replica's ranks): cheap enough for the GUI thread.
  built_ = snap_->shards.layer(layer_, replica_);
}

void ShardMapView::setLayer(int layer) {
  layer_ = std::max(0, layer);
  if (slider_->value() != layer_) slider_->setValue(layer_);
  buildShown();
  updateLabel();
  canvas_->update();
}

void ShardMapView::setReplica(int replica) {
  const int n = hasData() ? snap_->shards.replicas : 1;
  replica_ = std::clamp(replica, 0, std::max(0, n - 1));
  if (replicaBox_->value() != replica_) replicaBox_->setValue(replica_);
  buildShown();
  updateLabel();
  canvas_->update();
}

void ShardMapView::snapshotChanged() {
  const bool ok = hasData() && !snap_->shards.layers.empty();
  const int n = ok ? static_cast<int>(snap_->shards.layers.size()) : 1;
  slider_->setRange(0, n - 1);
  layer_ = std::min(layer_, n - 1);
  slider_->setEnabled(ok);
  canvas_->setVisible(ok);
  const bool perReplica = ok && !snap_->shards.complete();
  const int replicas = perReplica ? snap_->shards.replicas : 1;
  replica_ = std::min(replica_, replicas - 1);
  const QSignalBlocker block(replicaBox_);
  replicaBox_->setRange(0, replicas - 1);
  replicaBox_->setSuffix(QStringLiteral(" of %1").arg(replicas));
  replicaBox_->setValue(replica_);
  replicaBox_->setVisible(perReplica);
  buildShown();
  updateLabel();
  canvas_->update();
}

void ShardMapView::updateLabel() {
  const ShardLayer* shown = shownLayer();
  if (!shown) {
    label_->clear();
    return;
  }
  const ShardLayer& l = *shown;
  std::size_t regions = 0;  // of the ranks shown: with stages, those of the layer's stage
  for (const ShardInfo& s : l.shards)
    if (l.stage < 0 || snap_->shards.stageOf(s.rank) == l.stage) regions += s.recvs.size();
  QString text = QStringLiteral("<b>%1</b> (%2 of %3): input %4 of <i>%5</i>, halo regions %6")
                     .arg(l.name)
                     .arg(layer_ + 1)
                     .arg(snap_->shards.layers.size())
                     .arg(shapeText(l.shape), l.conv)
                     .arg(regions);
  if (l.stage >= 0)
    text += QStringLiteral(", run by pipeline stage %1 of %2 (its ranks shown)")
                .arg(l.stage)
                .arg(snap_->shards.stages.size());
  if (!snap_->shards.complete())
    text += QStringLiteral(
                " in replica %1 of %2 (%3 ranks each; the other replicas hold the other "
                "batch slices)")
                .arg(replica_)
                .arg(snap_->shards.replicas)
                .arg(snap_->shards.ranksPerReplica);
  label_->setText(text + QStringLiteral("<br>") + l.layout.toHtmlEscaped());
}

void ShardMapView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  if (paintMessage(p, rect())) return;
}

}  // namespace tessera::studio
