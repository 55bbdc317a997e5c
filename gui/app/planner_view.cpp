// PlannerView: run::plan in the background, PlanTableModel in a table; progress reports arrive on
// the planner's threads and are queued to the GUI thread; a row applies on double-click.
#include "planner_view.hpp"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <chrono>

namespace tessera::studio {

PlannerView::PlannerView(QWidget* parent) : QWidget(parent) {
  model_ = new PlanTableModel(this);
  table_ = new QTableView;
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  // Cluster meshes ("dp=128,sp_h=2,sp_w=4") and pruned bounds need their full width.
  table_->horizontalHeader()->setSectionResizeMode(PlanTableModel::Mesh,
                                                   QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(PlanTableModel::Iteration,
                                                   QHeaderView::ResizeToContents);
  run_ = new QPushButton(QStringLiteral("Plan for this model, input, batch and topology"));
  cancel_ = new QPushButton(QStringLiteral("Cancel"));
  cancel_->setObjectName(QStringLiteral("cancel"));
  bar_ = new QProgressBar;
  bar_->setFormat(QStringLiteral("%v / %m candidates"));
  best_ = new QLabel;
  status_ = new QLabel(
      QStringLiteral("The planner ranks every dp × spatial mesh, shard dimension and checkpointing "
                     "policy over the mesh's number of devices (tessera plan); candidates whose "
                     "lower bound is above the best time so far are not simulated (pruned)."));
  status_->setWordWrap(true);
  status_->setObjectName(QStringLiteral("status"));
  auto* running = new QHBoxLayout;
  running->addWidget(bar_, 1);
  running->addWidget(best_, 1);
  running->addWidget(cancel_);
  auto* v = new QVBoxLayout(this);
  v->addWidget(run_);
  v->addLayout(running);
  v->addWidget(status_);
  v->addWidget(table_, 1);
  setRunning(false);
  connect(run_, &QPushButton::clicked, this, [this] { runPlanner(); });
  connect(cancel_, &QPushButton::clicked, this, [this] { cancelPlanner(); });
  connect(table_, &QTableView::doubleClicked, this,
          [this](const QModelIndex& i) { emit applyConfig(model_->applyRow(i.row(), config_)); });
}

PlannerView::~PlannerView() {
  // The worker joins its thread when destroyed: stop the plan so that it does not wait for it.
  if (stop_) stop_->store(true);
}

QString PlannerView::bestText(const sim::PlanProgress& p) {
  if (p.best.empty()) return {};
  return QStringLiteral("best %1 s %2")
      .arg(p.best_s, 0, 'f', 3)
      .arg(QString::fromStdString(p.best));
}

void PlannerView::setRunning(bool running) {
  bar_->setVisible(running);
  best_->setVisible(running);
  cancel_->setVisible(running);
  cancel_->setEnabled(running);
}

void PlannerView::runPlanner() {
  if (stop_) stop_->store(true);  // a plan still running is superseded
  stop_ = std::make_shared<std::atomic<bool>>(false);
  const quint64 run = ++runId_;
  progress_ = {};
  reports_ = 0;
  bar_->setRange(0, 0);  // busy until the first report gives the total
  best_->clear();
  setRunning(true);
  status_->setStyleSheet(QString());
  status_->setText(QStringLiteral("Planning…"));
  const StudioConfig c = config_;
  const std::shared_ptr<std::atomic<bool>> stop = stop_;
  worker_.submit([this, c, stop, run]() -> std::function<void()> {
    const auto t0 = std::chrono::steady_clock::now();
    PlanControl control;
    control.cancel = stop.get();
    // From the planner's threads: copied and queued to this object's (the GUI) thread.
    control.progress = [this, run](const sim::PlanProgress& p) {
      QMetaObject::invokeMethod(
          this, [this, run, p] { showProgress(run, p); }, Qt::QueuedConnection);
    };
    try {
      auto r = std::make_shared<sim::PlanResult>(planFor(c, control));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return [this, r, s] { setPlan(*r, s); };
    } catch (const std::exception& e) {
      const QString msg = QString::fromStdString(e.what());
      return [this, msg] { setError(msg); };
    }
  });
}

void PlannerView::cancelPlanner() {
  if (!stop_) return;
  stop_->store(true);
  cancel_->setEnabled(false);
  status_->setText(QStringLiteral("Cancelling…"));
}

void PlannerView::showProgress(quint64 run, const sim::PlanProgress& p) {
  if (run != runId_) return;  // a report of a superseded plan, queued before it stopped
  progress_ = p;
  ++reports_;
  bar_->setRange(0, std::max(1, p.total));
  bar_->setValue(p.done);
  best_->setText(bestText(p));
  best_->setToolTip(
      QStringLiteral("%1 simulated, %2 pruned so far").arg(p.simulated).arg(p.pruned));
}

void PlannerView::setPlan(const sim::PlanResult& r, double wallS) {
  setRunning(false);
  progress_ = r.progress;
  model_->setResult(r);
  const int pruned = static_cast<int>(std::count_if(
      r.entries.begin(), r.entries.end(), [](const sim::PlanEntry& e) { return !e.simulated; }));
  QString t = r.cancelled ? QStringLiteral("<b>cancelled</b> after %1 of %2 candidates: ")
                                .arg(r.progress.done)
                                .arg(r.progress.total)
                          : QString();
  t += QStringLiteral(
           "%1 configurations on %2 devices (%3 simulated, %4 pruned: not simulated, their lower "
           "bound "
           "shown), %5 skipped, in %6 s; fastest first. Green: fastest that fits; red: does not "
           "fit. "
           "Double-click a row to apply it.")
           .arg(r.entries.size())
           .arg(r.devices)
           .arg(r.entries.size() - pruned)
           .arg(pruned)
           .arg(r.skipped.size())
           .arg(wallS, 0, 'f', 2);
  // A cluster skips dozens of meshes: the first few here, every one in the tooltip, so that the
  // table keeps its room.
  constexpr int kShownSkips = 6;
  QString all;
  for (std::size_t i = 0; i < r.skipped.size(); ++i) {
    const sim::PlanSkip& s = r.skipped[i];
    const QString line =
        QStringLiteral("skipped %1 %2: %3")
            .arg(QString::fromStdString(s.config.mesh), QString::fromStdString(s.config.shard),
                 QString::fromStdString(s.reason).toHtmlEscaped());
    all += (i ? QStringLiteral("<br>") : QString()) + line;
    if (i < kShownSkips) t += QStringLiteral("<br>") + line;
  }
  if (r.skipped.size() > kShownSkips)
    t += QStringLiteral("<br>… and %1 more skipped (hover here for all)")
             .arg(r.skipped.size() - kShownSkips);
  status_->setStyleSheet(QString());
  status_->setText(t);
  status_->setToolTip(all);
  if (r.best_fit() >= 0) table_->selectRow(r.best_fit());
  error_.clear();
  emit planned();
}

void PlannerView::setError(const QString& e) {
  setRunning(false);
  status_->setToolTip(QString());
  model_->setResult({});
  status_->setStyleSheet(QStringLiteral("color: #b41e1e;"));
  status_->setText(QStringLiteral("Cannot plan: ") + e.toHtmlEscaped());
  error_ = e;
  emit planned();
}

}  // namespace tessera::studio
