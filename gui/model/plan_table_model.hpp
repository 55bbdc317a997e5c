// The `tessera plan` table as a Qt item model: one row per simulated configuration (sim::plan),
// fastest first, with its fit against device memory; a pruned one (not simulated) shows its lower
// bound, "≥ 18.57 ms (pruned)"; skipped candidates are listed after.
#pragma once

#include <QAbstractTableModel>

#include "studio_config.hpp"
#include "tessera/sim/planner.hpp"

namespace tessera::studio {

class PlanTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    Mesh,
    Shard,
    Checkpointing,
    Iteration,
    ImagesPerS,
    PeakGB,
    ActivGB,
    Fit,
    Compute,
    Comm,
    NumColumns
  };
  using QAbstractTableModel::QAbstractTableModel;

  void setResult(const sim::PlanResult& r);
  const sim::PlanResult& result() const { return result_; }
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;
  /// `base` with row `row`'s mesh, shard, checkpointing and precision (what choosing the row
  /// applies).
  StudioConfig applyRow(int row, StudioConfig base) const;

 private:
  /// One cell's text; a pruned (not simulated) entry's time reads "≥ 18.57 ms (pruned)".
  static QVariant cell(const sim::PlanEntry& e, int column);
  sim::PlanResult result_;
};

}  // namespace tessera::studio
