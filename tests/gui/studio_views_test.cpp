// The studio's window on the offscreen platform: a configuration change re-simulates in the
// background and the views update; a bad configuration shows its error; --screenshot writes one
// non-blank PNG per view.
#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QImage>
#include <QTabWidget>
#include <QTemporaryDir>
#include <set>

#include "gui_app.hpp"
#include "main_window.hpp"
#include "planner_view.hpp"
#include "screenshot.hpp"
#include "shard_map_view.hpp"
#include "support/catch.hpp"
#include "tessera/core/error.hpp"
#include "timeline_view.hpp"

using namespace tessera;
using namespace tessera::studio;

namespace {

StudioConfig small() {
  StudioConfig c;
  c.model = "convnext-atto";
  c.input = "3x256x1024";
  c.batch = 2;
  c.mesh = "sp=2";
  return c;
}

/// Distinct colours in a coarse sample of the image.
std::size_t colours(const QImage& img) {
  std::set<QRgb> seen;
  for (int y = 0; y < img.height(); y += 3)
    for (int x = 0; x < img.width(); x += 3) seen.insert(img.pixel(x, y));
  return seen.size();
}

}  // namespace

TEST_CASE("a configuration change re-simulates in the background and the views update", "[gui]") {
  guiApp();
  MainWindow w;
  w.resize(1200, 800);
  w.show();
  StudioConfig c = small();
  w.setConfig(c);
  REQUIRE(waitFor([&] { return w.snapshot() && w.snapshot()->config == c; }));
  REQUIRE(w.snapshot()->ok());
  REQUIRE(w.snapshot()->numRanks == 2);
  REQUIRE(w.shardMap()->hasData());

  c.mesh = "dp=2,sp=2";
  w.setConfig(c);
  REQUIRE(waitFor([&] { return w.snapshot()->config == c; }));
  REQUIRE(w.snapshot()->ok());
  REQUIRE(w.snapshot()->memory.size() == 4);
  REQUIRE(w.shardMap()->snapshot() == w.snapshot());
  REQUIRE(w.snapshot()->wallS < 5);  // a typical update is well under a second on a free core

  c.mesh = "sp=64";  // impossible on a DGX with 8 GPUs: shown, not crashed
  w.setConfig(c);
  REQUIRE(waitFor([&] { return w.snapshot()->config == c; }));
  REQUIRE_FALSE(w.snapshot()->ok());
  REQUIRE(w.snapshot()->error.contains("64"));
  REQUIRE_FALSE(w.shardMap()->hasData());
  for (int i = 0; i < w.tabs()->count(); ++i) {  // every view paints the message
    w.tabs()->setCurrentIndex(i);
    REQUIRE_FALSE(w.grab().isNull());
  }
}

TEST_CASE("a session round-trips the configuration, the view and the layer", "[gui]") {
  guiApp();
  MainWindow w;
  StudioConfig c = small();
  c.checkpointing = "block";
  w.setConfig(c, false);
  w.tabs()->setCurrentIndex(2);
  const QJsonObject session = w.sessionJson();
  MainWindow v;
  v.applySession(session, "test session");
  REQUIRE(v.sessionJson() == session);
  REQUIRE_THROWS_AS(v.applySession(QJsonObject{{"config", 1}}, "bad"), InvalidArgument);
}

TEST_CASE("screenshot mode renders one non-blank PNG per view", "[gui]") {
  guiApp();
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QStringList files = renderScreenshots(dir.path(), small(), 1200, 800);
  REQUIRE(files.size() == MainWindow::viewNames().size() + 1);  // + teaching_backward.png
  REQUIRE(MainWindow::viewNames().contains("compare"));
  REQUIRE(MainWindow::viewNames().contains("teaching"));
  const QStringList names = MainWindow::viewNames() << "teaching_backward";
  for (const QString& name : names) {
    const QImage img(QDir(dir.path()).filePath(name + ".png"));
    INFO(name.toStdString());
    REQUIRE_FALSE(img.isNull());
    REQUIRE(img.width() == 1200);
    REQUIRE(colours(img) > 8);
  }
  SECTION("a bad configuration is refused with the simulator's message and writes nothing") {
    QTemporaryDir bad;
    StudioConfig c = small();
    c.mesh = "sp=3,dp=x";
    REQUIRE_THROWS_AS(renderScreenshots(bad.path() + "/out", c), Error);
    REQUIRE_FALSE(QDir(bad.path() + "/out").exists());
  }
}

TEST_CASE("a pipelined run's timeline colours kernels by micro-batch and widens stage labels",
          "[gui]") {
  guiApp();
  StudioConfig c = small();
  c.input = "3x64x256";
  c.batch = 4;
  c.microBatches = 2;
  c.mesh = "pp=2,sp=2";
  const auto s = simulate(c);
  INFO(s->error.toStdString());
  REQUIRE(s->ok());
  TimelineView timeline;
  timeline.resize(1200, 400);
  timeline.setSnapshot(s);
  REQUIRE(timeline.labelWidth() == TimelineView::kLabelWidth + TimelineView::kStageWidth);
  REQUIRE_FALSE(timeline.grab().toImage().isNull());
  ShardMapView shards;
  shards.resize(800, 600);
  shards.setSnapshot(s);
  REQUIRE_FALSE(shards.grab().toImage().isNull());
  // Kernels of micro-batches 0 and 1 differ, a backward is darker than its forward, and an event
  // of no micro-batch keeps the colour of its kind.
  TimelineEvent f0, f1, b0, opt;
  f0.cat = f1.cat = b0.cat = opt.cat = QStringLiteral("compute");
  f0.op = f1.op = QStringLiteral("conv2d_forward");
  b0.op = QStringLiteral("conv2d_backward_input");
  opt.op = QStringLiteral("adamw");
  f0.micro = b0.micro = 0;
  f1.micro = 1;
  REQUIRE(TimelineView::eventColor(f0, true) != TimelineView::eventColor(f1, true));
  REQUIRE(TimelineView::eventColor(b0, true).lightness() <
          TimelineView::eventColor(f0, true).lightness());
  REQUIRE(TimelineView::eventColor(opt, true) == TimelineView::eventColor(opt, false));
  REQUIRE(TimelineView::eventColor(f0, false) == TimelineView::eventColor(f1, false));
}
