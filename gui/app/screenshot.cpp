// renderScreenshots: one synchronous simulation and plan, then QWidget::grab() of each tab.
#include "screenshot.hpp"

#include <QApplication>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QPixmap>
#include <QTabWidget>
#include <chrono>

#include "main_window.hpp"
#include "compare_view.hpp"
#include "planner_view.hpp"
#include "shard_map_view.hpp"
#include "teaching_view.hpp"
#include "tessera/core/error.hpp"

namespace tessera::studio {

StudioConfig loadConfigFile(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly))
    throw InvalidArgument(("--config " + path + ": cannot read it (" + f.errorString() + ")").toStdString());
  const QByteArray text = f.readAll();
  const QJsonDocument doc = QJsonDocument::fromJson(text);
  if (doc.isObject() && doc.object().contains("tessera_studio_session")) {
    if (!doc.object().value("config").isObject())
      throw InvalidArgument(("--config " + path + ": a session without a \"config\" object").toStdString());
    return StudioConfig::fromJson(doc.object().value("config").toObject(), path);
  }
  return StudioConfig::fromJsonText(text, path);
}

QStringList renderScreenshots(const QString& dir, const StudioConfig& config, int width, int height,
                              const QString& measured) {
  std::shared_ptr<const Snapshot> snap = simulate(config);
  if (!snap->ok()) throw InvalidArgument(snap->error.toStdString());
  TESSERA_CHECK(QDir().mkpath(dir), "--screenshot ", dir.toStdString(), ": cannot create the directory");
  MainWindow w;
  w.resize(width, height);
  w.setConfig(config, /*simulate=*/false);  // shown in the panel; the snapshot above is used
  w.showSnapshot(snap);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const sim::PlanResult plan = planFor(config);
    w.planner()->setPlan(plan, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  } catch (const std::exception& e) {
    w.planner()->setError(QString::fromStdString(e.what()));
  }
  // Show the first convolution that exchanges halos, so the shard map has halos to show.
  for (std::size_t i = 0; i < snap->shards.layers.size(); ++i)
    if (snap->shards.layers[i].haloRegions() > 0) {
      w.shardMap()->setLayer(static_cast<int>(i));
      break;
    }
  if (!measured.isEmpty()) w.compare()->openMeasured(measured);
  w.teaching()->setStep(2);  // Receive: the buffers with their halos
  w.show();
  QStringList written;
  const QStringList names = MainWindow::viewNames();
  for (int i = 0; i < w.tabs()->count(); ++i) {
    w.tabs()->setCurrentIndex(i);
    QApplication::processEvents();
    const QString path = QDir(dir).filePath(names.value(i) + ".png");
    TESSERA_CHECK(w.grab().save(path, "PNG"), "--screenshot: cannot write ", path.toStdString());
    written << path;
  }
  w.tabs()->setCurrentWidget(w.teaching());
  w.teaching()->setStep(w.teaching()->stepCount() - 1);  // backward: the halo gradients added
  QApplication::processEvents();
  const QString back = QDir(dir).filePath(QStringLiteral("teaching_backward.png"));
  TESSERA_CHECK(w.grab().save(back, "PNG"), "--screenshot: cannot write ", back.toStdString());
  written << back;
  return written;
}

}  // namespace tessera::studio
