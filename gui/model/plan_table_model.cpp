// PlanTableModel: sim::PlanResult rows, formatted as `tessera plan` prints them.
#include "plan_table_model.hpp"

#include <QBrush>
#include <QColor>

#include "studio_data.hpp"

namespace tessera::studio {

void PlanTableModel::setResult(const sim::PlanResult& r) {
  beginResetModel();
  result_ = r;
  endResetModel();
}

int PlanTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(result_.entries.size());
}

int PlanTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : NumColumns;
}

QVariant PlanTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (o == Qt::Vertical) return section + 1;
  static const char* names[] = {"mesh",    "shard",    "ckpt", "iteration", "images/s",
                                "peak GB", "activ GB", "fit",  "compute",   "comm"};
  return section >= 0 && section < NumColumns ? QString::fromLatin1(names[section]) : QVariant();
}

QVariant PlanTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const sim::PlanEntry& e = result_.entries[index.row()];
  const bool best = index.row() == result_.best_fit();
  if (role == Qt::BackgroundRole) {
    if (!e.fits) return QBrush(QColor(250, 215, 215));
    if (best) return QBrush(QColor(210, 240, 210));
    return {};
  }
  if (role == Qt::ForegroundRole) return e.simulated ? QVariant() : QBrush(QColor(110, 110, 110));
  if (role == Qt::ToolTipRole) {
    if (!e.simulated)
      return QStringLiteral(
                 "pruned: not simulated, its lower bound %1 is above the best time that fits "
                 "(or its memory does not fit); double-click to apply and simulate it")
          .arg(formatPs(static_cast<sim::Picos>(e.lower_bound_s * 1e12)));
    return best ? QStringLiteral("fastest configuration that fits; double-click to apply")
                : QStringLiteral("double-click to apply this configuration");
  }
  if (role != Qt::DisplayRole) return {};
  return cell(e, index.column());
}

QVariant PlanTableModel::cell(const sim::PlanEntry& e, int column) {
  if (!e.simulated) {
    // A pruned entry's time is its lower bound (PlanEntry::iteration_s), its images/s an upper
    // bound, and it has no busy times: the engine never ran it.
    switch (column) {
      case Iteration:
        return QStringLiteral("≥ %1 (pruned)")
            .arg(formatPs(static_cast<sim::Picos>(e.iteration_s * 1e12)));
      case ImagesPerS:
        return QStringLiteral("≤ %1").arg(e.images_per_s, 0, 'f', 3);
      case Compute:
      case Comm:
        return QStringLiteral("–");
      default:
        break;
    }
  }
  switch (column) {
    case Mesh:
      return QString::fromStdString(e.config.mesh);
    case Shard:
      return QString::fromStdString(e.config.shard);
    case Checkpointing:
      return QString::fromStdString(e.config.checkpointing);
    case Iteration:
      return formatPs(static_cast<sim::Picos>(e.iteration_s * 1e12));
    case ImagesPerS:
      return QString::number(e.images_per_s, 'f', 3);
    case PeakGB:
      return QString::number(e.peak_bytes / 1e9, 'f', 2);
    case ActivGB:
      return QString::number(e.activation_peak_bytes / 1e9, 'f', 2);
    case Fit:
      return e.fits ? QStringLiteral("ok") : QStringLiteral("OOM");
    case Compute:
      return formatPs(static_cast<sim::Picos>(e.compute_busy_s * 1e12));
    case Comm:
      return formatPs(static_cast<sim::Picos>(e.comm_busy_s * 1e12));
  }
  return {};
}

StudioConfig PlanTableModel::applyRow(int row, StudioConfig base) const {
  if (row < 0 || row >= rowCount()) return base;
  const sim::PlanConfig& c = result_.entries[row].config;
  base.mesh = QString::fromStdString(c.mesh);
  if (c.shard == "W" || c.shard == "H") base.shard = QString::fromStdString(c.shard);
  base.checkpointing = QString::fromStdString(c.checkpointing);
  base.precision = QString::fromStdString(c.precision);
  return base;
}

}  // namespace tessera::studio
