// PlannerView: sim::plan in the background, PlanTableModel in a table; a row applies on double-click.
#include "planner_view.hpp"

#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>
#include <chrono>

namespace tessera::studio {

PlannerView::PlannerView(QWidget* parent) : QWidget(parent) {
  model_ = new PlanTableModel(this);
  table_ = new QTableView;
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  run_ = new QPushButton(QStringLiteral("Plan for this model, input, batch and topology"));
  status_ = new QLabel(QStringLiteral("The planner ranks every dp × spatial mesh, shard dimension and checkpointing "
                                      "policy over the mesh's number of devices (tessera plan)."));
  status_->setWordWrap(true);
  auto* v = new QVBoxLayout(this);
  v->addWidget(run_);
  v->addWidget(status_);
  v->addWidget(table_, 1);
  connect(run_, &QPushButton::clicked, this, [this] { runPlanner(); });
  connect(table_, &QTableView::doubleClicked, this,
          [this](const QModelIndex& i) { emit applyConfig(model_->applyRow(i.row(), config_)); });
}

void PlannerView::runPlanner() {
  status_->setText(QStringLiteral("Planning…"));
  const StudioConfig c = config_;
  worker_.submit([this, c]() -> std::function<void()> {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      auto r = std::make_shared<sim::PlanResult>(planFor(c));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return [this, r, s] { setPlan(*r, s); };
    } catch (const std::exception& e) {
      const QString msg = QString::fromStdString(e.what());
      return [this, msg] { setError(msg); };
    }
  });
}

void PlannerView::setPlan(const sim::PlanResult& r, double wallS) {
  model_->setResult(r);
  QString t = QStringLiteral("%1 configurations simulated on %2 devices, %3 skipped, in %4 s; fastest first. "
                             "Green: fastest that fits; red: does not fit. Double-click a row to apply it.")
                  .arg(r.entries.size()).arg(r.devices).arg(r.skipped.size()).arg(wallS, 0, 'f', 2);
  for (const sim::PlanSkip& s : r.skipped)
    t += QStringLiteral("<br>skipped %1 %2: %3")
             .arg(QString::fromStdString(s.config.mesh), QString::fromStdString(s.config.shard),
                  QString::fromStdString(s.reason).toHtmlEscaped());
  status_->setStyleSheet(QString());
  status_->setText(t);
  if (r.best_fit() >= 0) table_->selectRow(r.best_fit());
  error_.clear();
  emit planned();
}

void PlannerView::setError(const QString& e) {
  model_->setResult({});
  status_->setStyleSheet(QStringLiteral("color: #b41e1e;"));
  status_->setText(QStringLiteral("Cannot plan: ") + e.toHtmlEscaped());
  error_ = e;
  emit planned();
}

}  // namespace tessera::studio
