// MainWindow: wires the panel to the SimulationRunner and the snapshot to the views; menus for
// sessions and exports (PNG of the current view, the simulated trace, the configuration).
#include "main_window.hpp"

#include <QFile>
#include <QFileDialog>
#include <QJsonDocument>
#include <QMenuBar>
#include <QMessageBox>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <sstream>

#include "compare_view.hpp"
#include "config_panel.hpp"
#include "memory_view.hpp"
#include "planner_view.hpp"
#include "shard_map_view.hpp"
#include "teaching_view.hpp"
#include "tessera/core/error.hpp"
#include "timeline_view.hpp"
#include "topology_view.hpp"

namespace tessera::studio {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(QStringLiteral("tessera studio"));
  panel_ = new ConfigPanel;
  tabs_ = new QTabWidget;
  shardMap_ = new ShardMapView;
  timeline_ = new TimelineView;
  memory_ = new MemoryView;
  topology_ = new TopologyView;
  planner_ = new PlannerView;
  compare_ = new CompareView;
  teaching_ = new TeachingView;
  tabs_->addTab(shardMap_, QStringLiteral("Shard map"));
  tabs_->addTab(timeline_, QStringLiteral("Timeline"));
  tabs_->addTab(memory_, QStringLiteral("Memory"));
  tabs_->addTab(topology_, QStringLiteral("Topology"));
  tabs_->addTab(planner_, QStringLiteral("Planner"));
  tabs_->addTab(compare_, QStringLiteral("Compare"));
  tabs_->addTab(teaching_, QStringLiteral("Teaching"));
  auto* split = new QSplitter;
  split->addWidget(panel_);
  split->addWidget(tabs_);
  split->setStretchFactor(1, 1);
  setCentralWidget(split);
  buildMenus();
  connect(panel_, &ConfigPanel::configChanged, this, [this](const StudioConfig& c) { onConfigChanged(c); });
  connect(&runner_, &SimulationRunner::finished, this, [this](std::shared_ptr<const Snapshot> s) { showSnapshot(s); });
  connect(planner_, &PlannerView::applyConfig, this, [this](const StudioConfig& c) {
    setConfig(c);
    tabs_->setCurrentWidget(timeline_);
  });
  planner_->setConfig(panel_->config());
}

QStringList MainWindow::viewNames() {
  return {"shard_map", "timeline", "memory", "topology", "planner", "compare", "teaching"};
}

void MainWindow::setConfig(const StudioConfig& c, bool simulate) {
  panel_->setConfig(c);
  planner_->setConfig(c);
  if (simulate) onConfigChanged(c);
}

void MainWindow::onConfigChanged(const StudioConfig& c) {
  planner_->setConfig(c);
  runner_.request(c);
  panel_->setStatus(QStringLiteral("Simulating…"), false);
}

void MainWindow::showSnapshot(std::shared_ptr<const Snapshot> s) {
  snap_ = s;
  for (SnapshotView* v : std::initializer_list<SnapshotView*>{shardMap_, timeline_, memory_, topology_, compare_})
    v->setSnapshot(s);
  if (!s->ok()) {
    panel_->setStatus(s->error, true);
    statusBar()->showMessage(QStringLiteral("Configuration error (see the panel)"));
    return;
  }
  int oom = 0;
  for (const MemoryBar& b : s->memory) oom += b.oom();
  const QString text = QStringLiteral("%1, mesh %2 on %3: iteration %4%5\n(simulated in %6 s)")
                           .arg(s->modelName, s->meshText, s->topology.name, formatPs(s->result.iteration_ps),
                                oom ? QStringLiteral(", %1 device(s) OOM").arg(oom) : QString())
                           .arg(s->wallS, 0, 'f', 2);
  panel_->setStatus(text, oom > 0);
  statusBar()->showMessage(QString(text).replace('\n', ' '));
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(QStringLiteral("&File"));
  file->addAction(QStringLiteral("&Open session…"), QKeySequence::Open, this, [this] { openSession(); });
  file->addAction(QStringLiteral("&Save session…"), QKeySequence::Save, this, [this] { saveSession(); });
  file->addSeparator();
  file->addAction(QStringLiteral("Open &measured trace…"), this, [this] { openMeasured(); });
  file->addSeparator();
  file->addAction(QStringLiteral("Export view as &PNG…"), this, [this] { exportPng(); });
  file->addAction(QStringLiteral("Export simulated &trace JSON…"), this, [this] { exportTrace(); });
  file->addAction(QStringLiteral("Export &configuration JSON…"), this, [this] { exportConfig(); });
  file->addSeparator();
  file->addAction(QStringLiteral("&Quit"), QKeySequence::Quit, this, [this] { close(); });
}

QJsonObject MainWindow::sessionJson() const {
  return QJsonObject{{"tessera_studio_session", 1},
                     {"config", panel_->config().toJson()},
                     {"view", tabs_->currentIndex()},
                     {"layer", shardMap_->layer()}};
}

void MainWindow::applySession(const QJsonObject& o, const QString& origin) {
  if (o.value("tessera_studio_session").toInt() != 1 || !o.value("config").isObject())
    throw InvalidArgument((origin + ": not a tessera studio session (expected \"tessera_studio_session\": 1 and a "
                                    "\"config\" object)").toStdString());
  const StudioConfig c = StudioConfig::fromJson(o.value("config").toObject(), origin);
  tabs_->setCurrentIndex(std::clamp(o.value("view").toInt(), 0, tabs_->count() - 1));
  shardMap_->setLayer(o.value("layer").toInt());
  setConfig(c);
}

namespace {

bool writeBytes(QWidget* parent, const QString& path, const QByteArray& bytes) {
  QFile f(path);
  if (f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size()) return true;
  QMessageBox::warning(parent, QStringLiteral("tessera studio"),
                       QStringLiteral("Cannot write %1: %2").arg(path, f.errorString()));
  return false;
}

}  // namespace

void MainWindow::openSession() {
  const QString path = QFileDialog::getOpenFileName(this, QStringLiteral("Open session"), {},
                                                    QStringLiteral("Studio session (*.json)"));
  if (path.isEmpty()) return;
  QFile f(path);
  try {
    if (!f.open(QIODevice::ReadOnly)) throw InvalidArgument(("cannot read " + path + ": " + f.errorString()).toStdString());
    QJsonParseError err;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &err);
    if (err.error != QJsonParseError::NoError)
      throw InvalidArgument((path + ": not valid JSON: " + err.errorString()).toStdString());
    applySession(doc.object(), path);
  } catch (const std::exception& e) {
    QMessageBox::warning(this, QStringLiteral("tessera studio"), QString::fromStdString(e.what()));
  }
}

void MainWindow::saveSession() {
  const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Save session"), QStringLiteral("session.json"),
                                                    QStringLiteral("Studio session (*.json)"));
  if (!path.isEmpty()) writeBytes(this, path, QJsonDocument(sessionJson()).toJson());
}

void MainWindow::exportPng() {
  const QString name = viewNames().value(tabs_->currentIndex());
  const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Export view"), name + ".png",
                                                    QStringLiteral("PNG image (*.png)"));
  if (!path.isEmpty() && !tabs_->currentWidget()->grab().save(path, "PNG"))
    QMessageBox::warning(this, QStringLiteral("tessera studio"), QStringLiteral("Cannot write %1").arg(path));
}

void MainWindow::exportTrace() {
  if (!snap_ || !snap_->ok()) {
    QMessageBox::information(this, QStringLiteral("tessera studio"), QStringLiteral("No simulated trace to export."));
    return;
  }
  const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Export trace"), QStringLiteral("trace.json"),
                                                    QStringLiteral("Chrome trace (*.json)"));
  if (path.isEmpty()) return;
  std::ostringstream os;
  core::write_chrome_trace(os, snap_->result.trace, snap_->result.process_names,
                           {{"source", "tessera studio"}, {"model", snap_->modelName.toStdString()},
                            {"mesh", snap_->meshText.toStdString()}, {"topology", snap_->topology.name.toStdString()}});
  writeBytes(this, path, QByteArray::fromStdString(os.str()));
}

void MainWindow::openMeasured() {
  const QString path = QFileDialog::getOpenFileName(this, QStringLiteral("Open measured trace (tessera train --trace)"),
                                                    {}, QStringLiteral("Chrome trace (*.json)"));
  if (path.isEmpty()) return;
  try {
    compare_->openMeasured(path);
    tabs_->setCurrentWidget(compare_);
  } catch (const std::exception& e) {
    QMessageBox::warning(this, QStringLiteral("tessera studio"), QString::fromStdString(e.what()));
  }
}

void MainWindow::exportConfig() {
  const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Export configuration"),
                                                    QStringLiteral("config.json"), QStringLiteral("JSON (*.json)"));
  if (!path.isEmpty()) writeBytes(this, path, QJsonDocument(panel_->config().toJson()).toJson());
}

}  // namespace tessera::studio
