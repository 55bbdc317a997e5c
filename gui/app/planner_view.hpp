// Planner: the `tessera plan` table for the current model, input, batch and topology over as many
// devices as the mesh has, run in the background on request with a progress bar, the best
// configuration so far and a Cancel button; double-clicking a row applies it.
#pragma once

#include <QWidget>
#include <atomic>
#include <memory>

#include "plan_table_model.hpp"
#include "simulation.hpp"

class QLabel;
class QProgressBar;
class QPushButton;
class QTableView;

namespace tessera::studio {

class PlannerView : public QWidget {
  Q_OBJECT
 public:
  explicit PlannerView(QWidget* parent = nullptr);
  ~PlannerView() override;
  void setConfig(const StudioConfig& c) { config_ = c; }
  /// Plans now on the worker thread (latest wins; a plan still running is cancelled).
  void runPlanner();
  /// Stops the running plan: it returns soon with the candidates decided so far ("cancelled").
  void cancelPlanner();
  /// Shows a finished (or cancelled) plan (screenshot mode plans synchronously and calls this).
  void setPlan(const sim::PlanResult& r, double wallS);
  void setError(const QString& e);
  PlanTableModel* model() { return model_; }
  /// The last plan's error (empty after a plan that succeeded).
  QString error() const { return error_; }
  /// The latest progress report of the running (or last) plan, on the GUI thread.
  const sim::PlanProgress& progress() const { return progress_; }
  /// Progress reports shown since the last runPlanner().
  int progressReports() const { return reports_; }
  /// "best 1.234 s dp=16,sp=4 W none fp32", or empty while no configuration fits.
  static QString bestText(const sim::PlanProgress& p);

 signals:
  void applyConfig(const tessera::studio::StudioConfig& c);
  /// A plan (or its error) is shown.
  void planned();

 private:
  void showProgress(quint64 run, const sim::PlanProgress& p);
  void setRunning(bool running);
  StudioConfig config_;
  PlanTableModel* model_;
  QTableView* table_;
  QLabel* status_;
  QLabel* best_;
  QProgressBar* bar_;
  QPushButton* run_;
  QPushButton* cancel_;
  QString error_;
  sim::PlanProgress progress_;
  int reports_ = 0;
  quint64 runId_ = 0;                        ///< the plan whose progress is shown
  std::shared_ptr<std::atomic<bool>> stop_;  ///< that plan's cancel flag
  LatestWinsWorker worker_;                  ///< last: destroyed (joined) first
};

}  // namespace tessera::studio
