// CompareView: paints a Comparison as a table with paired bars (measured, simulated) and the error.
#include "compare_view.hpp"

#include <cmath>

#include "tessera/core/error.hpp"

namespace tessera::studio {

namespace {
const QColor kMeasured(78, 121, 167), kSimulated(242, 142, 43);

QString us(double v) { return formatPs(static_cast<sim::Picos>(std::llround(v * 1e6))); }
}  // namespace

CompareView::CompareView(QWidget* parent) : SnapshotView(parent) { setMinimumHeight(200); }

void CompareView::openMeasured(const QString& path) {
  core::ChromeTrace t = core::read_chrome_trace_file(path.toStdString());
  measured_ = std::move(t);
  measuredPath_ = path;
  recompute();
  update();
}

void CompareView::snapshotChanged() { recompute(); }

void CompareView::recompute() {
  comparison_.reset();
  error_.clear();
  if (!measured_ || !hasData()) return;
  try {
    comparison_ = run::compare_traces(*measured_, snap_->result.trace, snap_->modelName.toStdString(),
                                      snap_->meshText.toStdString(), snap_->config.input.toStdString());
  } catch (const std::exception& e) {
    error_ = QString::fromStdString(e.what());
  }
}

void CompareView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  if (paintMessage(p, rect())) return;
  p.fillRect(rect(), Qt::white);
  const QRect text = rect().adjusted(20, 20, -20, -20);
  if (!measured_ || !error_.isEmpty()) {
    p.setPen(error_.isEmpty() ? QColor(60, 60, 60) : QColor(180, 30, 30));
    p.drawText(text, Qt::AlignCenter | Qt::TextWordWrap,
               error_.isEmpty() ? QStringLiteral("No measured trace yet.\n\nRun the same configuration for real, e.g.\n"
                                                 "tessera train --model convnext-atto --input 3x64x256 --mesh sp=2 "
                                                 "--task classify --classes 12 --steps 4 --trace run.json\n"
                                                 "and open run.json with File → Open measured trace…")
                                : QStringLiteral("Cannot compare %1:\n\n%2").arg(measuredPath_, error_));
    return;
  }
  const run::Comparison& c = *comparison_;
  int y = 28;
  p.setPen(Qt::black);
  QFont bold = p.font();
  bold.setBold(true);
  p.setFont(bold);
  p.drawText(20, y, QStringLiteral("Measured %1 vs simulated %2, mesh %3 on %4")
                        .arg(QString::fromStdString(c.measured_source), snap_->modelName, snap_->meshText, snap_->topology.name));
  p.setFont(font());
  y += 20;
  p.drawText(20, y, QStringLiteral("%1: %2 ranks, %3 steps (mean of %4 after the first); simulated: one iteration. "
                                   "Per rank and step; halo and collectives: time with one in flight.")
                        .arg(measuredPath_).arg(c.measured.ranks).arg(c.measured.steps).arg(c.measured.steps_used));
  if (!c.mismatch.empty()) {
    y += 20;
    p.setPen(QColor(180, 30, 30));
    p.drawText(20, y, QString::fromStdString(c.mismatch) + QStringLiteral(" — the comparison is not like for like"));
  }
  y += 30;
  // Table: label | measured | simulated | error | bars.
  const int xLabel = 20, xMeas = 190, xSim = 300, xErr = 410, xBars = 500;
  const int barW = std::max(100, width() - xBars - 30);
  double scale = 0;
  for (const run::CompareRow& r : c.rows) scale = std::max({scale, r.measured_us, r.simulated_us});
  p.setFont(bold);
  p.drawText(xLabel, y, QStringLiteral("phase / layer group"));
  p.drawText(xMeas, y, QStringLiteral("measured"));
  p.drawText(xSim, y, QStringLiteral("simulated"));
  p.drawText(xErr, y, QStringLiteral("error"));
  p.fillRect(QRect(xBars, y - 10, 12, 10), kMeasured);
  p.drawText(xBars + 16, y, QStringLiteral("measured"));
  p.fillRect(QRect(xBars + 100, y - 10, 12, 10), kSimulated);
  p.drawText(xBars + 116, y, QStringLiteral("simulated"));
  p.setFont(font());
  const int rowH = std::max(18, std::min(34, (height() - y - 20) / std::max<int>(1, static_cast<int>(c.rows.size()) + 1)));
  bool groupsStarted = false;
  for (const run::CompareRow& r : c.rows) {
    y += rowH;
    if (r.group && !groupsStarted) {
      groupsStarted = true;
      p.setPen(QColor(200, 200, 200));
      p.drawLine(xLabel, y - rowH + 4, width() - 20, y - rowH + 4);
    }
    p.setPen(Qt::black);
    p.drawText(xLabel + (r.group ? 12 : 0), y, QString::fromStdString(r.label));
    p.drawText(xMeas, y, us(r.measured_us));
    p.drawText(xSim, y, us(r.simulated_us));
    const double e = r.error_pct();
    p.setPen(std::isnan(e) ? Qt::gray : std::abs(e) <= 20 ? QColor(40, 130, 40) : QColor(180, 30, 30));
    p.drawText(xErr, y, std::isnan(e) ? QStringLiteral("–") : QStringLiteral("%1%2 %").arg(e > 0 ? "+" : "").arg(e, 0, 'f', 1));
    const int h = std::max(4, rowH / 2 - 3);
    if (scale > 0) {
      p.fillRect(QRectF(xBars, y + 6 - 2 * h - 1, barW * r.measured_us / scale, h), kMeasured);
      p.fillRect(QRectF(xBars, y + 6 - h, barW * r.simulated_us / scale, h), kSimulated);
    }
  }
}

}  // namespace tessera::studio
