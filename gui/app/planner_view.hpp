// Planner: the `tessera plan` table for the current model, input, batch and topology over as many
// devices as the mesh has, run in the background on request; double-clicking a row applies it.
#pragma once

#include <QWidget>

#include "plan_table_model.hpp"
#include "simulation.hpp"

class QLabel;
class QPushButton;
class QTableView;

namespace tessera::studio {

class PlannerView : public QWidget {
  Q_OBJECT
 public:
  explicit PlannerView(QWidget* parent = nullptr);
  void setConfig(const StudioConfig& c) { config_ = c; }
  /// Plans now on the worker thread (latest wins).
  void runPlanner();
  /// Shows a finished plan (screenshot mode plans synchronously and calls this).
  void setPlan(const sim::PlanResult& r, double wallS);
  void setError(const QString& e);
  PlanTableModel* model() { return model_; }
  /// The last plan's error (empty after a plan that succeeded).
  QString error() const { return error_; }

 signals:
  void applyConfig(const tessera::studio::StudioConfig& c);
  /// A plan (or its error) is shown.
  void planned();

 private:
  StudioConfig config_;
  PlanTableModel* model_;
  QTableView* table_;
  QLabel* status_;
  QPushButton* run_;
  QString error_;
  LatestWinsWorker worker_;
};

}  // namespace tessera::studio
