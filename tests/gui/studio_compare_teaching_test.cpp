// The compare view's breakdown (a hand-built trace with known phase times, and a trace the real
// `tessera train --trace` writes beside its simulation), a calibrated configuration (the same
// iteration time as `tessera sim run --calibration`), the timeline's critical path (equal to the
// simulator's), and teaching mode (its numbers against the float64 reference convolution).
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QImage>
#include <QProcess>
#include <QTemporaryDir>
#include <cmath>
#include <set>

#include "compare_view.hpp"
#include "config_panel.hpp"
#include "gui_app.hpp"
#include "main_window.hpp"
#include "simulation.hpp"
#include "support/catch.hpp"
#include "support/reference/conv2d_ref.hpp"
#include "teaching.hpp"
#include "teaching_view.hpp"
#include "tessera/core/error.hpp"
#include "tessera/sim/calibration.hpp"

using namespace tessera;
using namespace tessera::studio;
using Catch::Matchers::Contains;

namespace {

core::TraceEvent kernel(int pid, double ts, double dur, const std::string& name, const std::string& layer) {
  core::TraceEvent e;
  e.name = e.op = name;
  e.cat = "compute";
  e.pid = pid;
  e.ts_us = ts;
  e.dur_us = dur;
  e.layer = layer;
  return e;
}

core::TraceEvent transfer(int pid, double ts, double dur, const std::string& cat) {
  core::TraceEvent e = kernel(pid, ts, dur, cat == "halo" ? "send" : "all_reduce", "x");
  e.cat = cat;
  e.tid = cat == "halo" ? core::kLaneHaloBase : core::kLaneComm;
  return e;
}

// One step of one rank starting at t: forward 10 + 20 (stem, stages.0), loss 5, backward 30,
// optimizer 4; two overlapping halo transfers covering [t+2, t+9) and a collective of 6.
void step(std::vector<core::TraceEvent>& v, int pid, double t, double scale) {
  v.push_back(kernel(pid, t, 10 * scale, "conv2d_forward", "stem.conv"));
  v.push_back(kernel(pid, t + 10 * scale, 20 * scale, "conv2d_forward", "stages.0.blocks.0.dwconv"));
  v.push_back(kernel(pid, t + 30 * scale, 5 * scale, "softmax_cross_entropy", "loss"));
  v.push_back(kernel(pid, t + 35 * scale, 30 * scale, "conv2d_backward_data", "stages.0.blocks.0.dwconv"));
  v.push_back(kernel(pid, t + 65 * scale, 2 * scale, "sum_squares", "optimizer"));
  v.push_back(kernel(pid, t + 67 * scale, 2 * scale, "adamw_step", "optimizer"));
  v.push_back(transfer(pid, t + 2, 5, "halo"));
  v.push_back(transfer(pid, t + 4, 5, "halo"));
  v.push_back(transfer(pid, t + 40, 6, "comm"));
}

QString tesseraCli() { return QStringLiteral(TESSERA_CLI_PATH); }

// convnext-atto at 3×32×64, batch 1, sp=2 on the cpu-host preset: small enough to train for real.
StudioConfig tinyConfig() {
  StudioConfig c;
  c.model = "convnext-atto";
  c.input = "3x32x64";
  c.batch = 1;
  c.mesh = "sp=2";
  c.topology = "cpu-host:2";
  return c;
}

// Runs `tessera train` for the tiny configuration and returns the trace file. The studio simulates
// task classify, as `tessera sim run` does (its 1000-class head; synthetic data has at most 12).
QString trainTrace(const QTemporaryDir& dir, int steps) {
  const QString path = dir.filePath("measured.json");
  QProcess p;
  p.start(tesseraCli(), {"train", "--model", "convnext-atto", "--input", "3x32x64", "--batch", "1", "--mesh", "sp=2",
                         "--task", "classify", "--classes", "12", "--steps", QString::number(steps), "--threads",
                         "1", "--trace", path});
  REQUIRE(p.waitForFinished(120000));
  INFO(p.readAllStandardError().toStdString());
  REQUIRE(p.exitCode() == 0);
  return path;
}

// Runs the CLI with `args`; its standard output (a failure shows its standard error).
QByteArray runCli(const QStringList& args) {
  QProcess p;
  p.start(tesseraCli(), args);
  REQUIRE(p.waitForFinished(120000));
  INFO(p.readAllStandardError().toStdString());
  REQUIRE(p.exitStatus() == QProcess::NormalExit);
  REQUIRE(p.exitCode() == 0);
  return p.readAllStandardOutput();
}

// What `load_calibration(path)` throws.
std::string loaderMessage(const QString& path) {
  try {
    sim::load_calibration(path.toStdString());
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("a calibrated configuration simulates what tessera sim run --calibration does", "[gui][calibration]") {
  guiApp();
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString cal = dir.filePath("calibration.json");
  runCli({"calibrate", "--quick", "--ranks", "2", "--out", cal});
  StudioConfig c = tinyConfig();
  c.calibration = cal;
  REQUIRE(StudioConfig::fromJsonText(QJsonDocument(c.toJson()).toJson()) == c);
  REQUIRE_FALSE(tinyConfig().toJson().contains("calibration"));  // none: the key is left out

  const auto calibrated = simulate(c);
  INFO(calibrated->error.toStdString());
  REQUIRE(calibrated->ok());
  const QByteArray out = runCli({"sim", "run", "--model", "convnext-atto", "--input", "3x32x64", "--batch", "1",
                                 "--mesh", "sp=2", "--topology", "cpu-host:2", "--calibration", cal, "--json"});
  QJsonParseError err;
  const QJsonDocument doc = QJsonDocument::fromJson(out, &err);
  INFO(out.toStdString());
  REQUIRE(err.error == QJsonParseError::NoError);
  const double cliS = doc.object().value("iteration_time_s").toDouble();
  REQUIRE(cliS > 0);
  // The CLI prints 9 significant digits.
  REQUIRE_THAT(calibrated->result.iteration_ps / 1e12, WithinRel(cliS, 1e-8));
  // The calibration was applied: the built-in cpu-host figures give another time.
  const auto plain = simulate(tinyConfig());
  REQUIRE(plain->ok());
  REQUIRE(plain->result.iteration_ps != calibrated->result.iteration_ps);
  // The planner uses it too: the same mesh, shard and checkpointing is timed alike.
  const sim::PlanResult plan = planFor(c);
  bool found = false;
  for (const sim::PlanEntry& e : plan.entries)
    if (e.config.mesh == "sp=2" && e.config.shard == "W" && e.config.checkpointing == "none") {
      found = true;
      REQUIRE_THAT(e.iteration_s, WithinRel(calibrated->result.iteration_ps / 1e12, 1e-12));
    }
  REQUIRE(found);

  SECTION("a missing or malformed calibration file is refused with the loader's message") {
    QFile bad(dir.filePath("bad_calibration.json"));
    REQUIRE(bad.open(QIODevice::WriteOnly));
    bad.write(R"({"format": "tessera-calibration", "version": 1})");
    bad.close();
    for (const QString& path : {dir.filePath("missing.json"), bad.fileName()}) {
      c.calibration = path;
      const std::string expected = loaderMessage(path);
      INFO(expected);
      REQUIRE_THAT(expected, Contains(path.toStdString()));
      const auto s = simulate(c);
      REQUIRE_FALSE(s->ok());
      REQUIRE(s->error.toStdString() == expected);
      MainWindow w;  // the panel shows it
      w.showSnapshot(s);
      REQUIRE(w.panel()->status().toStdString() == expected);
    }
  }
}

TEST_CASE("phase breakdown of a hand-built trace", "[gui][compare]") {
  std::vector<core::TraceEvent> v;
  // Two ranks, three steps; step 0 (warm-up) is twice as slow and is left out of the means.
  for (int pid = 0; pid < 2; ++pid) {
    step(v, pid, 0, 2.0);
    step(v, pid, 200, 1.0);
    step(v, pid, 300, pid == 0 ? 1.0 : 1.5);
  }
  const run::PhaseBreakdown b = run::phase_breakdown(v);
  REQUIRE(b.ranks == 2);
  REQUIRE(b.steps == 3);
  REQUIRE(b.steps_used == 2);
  // Per rank and step: (3 step-rank pairs at scale 1, one at 1.5) / 4.
  const double mean = (3 * 1.0 + 1.5) / 4;
  REQUIRE_THAT(b.phase_us[run::kForward], WithinAbs(35 * mean, 1e-9));
  REQUIRE_THAT(b.phase_us[run::kBackward], WithinAbs(30 * mean, 1e-9));
  REQUIRE_THAT(b.phase_us[run::kOptimizer], WithinAbs(4 * mean, 1e-9));
  REQUIRE_THAT(b.phase_us[run::kHalo], WithinAbs(7, 1e-9));  // [2,7) ∪ [4,9)
  REQUIRE_THAT(b.phase_us[run::kCollective], WithinAbs(6, 1e-9));
  // Iteration: step 1 spans 69, step 2 spans 69 · 1.5 (the slower rank).
  REQUIRE_THAT(b.iteration_us, WithinAbs((69 + 69 * 1.5) / 2, 1e-9));
  REQUIRE(b.group_us.size() == 4);
  REQUIRE(b.group_us[0].first == "stem");
  REQUIRE(b.group_us[1].first == "stages.0");
  REQUIRE_THAT(b.group_us[1].second, WithinAbs(50 * mean, 1e-9));
  REQUIRE(b.group_us[2].first == "loss");
  REQUIRE(b.group_us[3].first == "optimizer");
  REQUIRE_THROWS_AS(run::phase_breakdown({transfer(0, 0, 1, "halo")}), InvalidArgument);
  v.pop_back();  // drop rank 1's last collective: still 3 steps each
  v.erase(v.begin() + 9);  // drop rank 0's step-1 stem conv: still three steps
  REQUIRE(run::phase_breakdown(v).steps == 3);
}

TEST_CASE("compare: a real tessera train trace beside its simulation", "[gui][compare]") {
  guiApp();
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString path = trainTrace(dir, 3);
  const core::ChromeTrace measured = core::read_chrome_trace_file(path.toStdString());
  const auto snap = simulate(tinyConfig());
  REQUIRE(snap->ok());
  const run::Comparison c = run::compare_traces(measured, snap->result.trace, snap->modelName.toStdString(), snap->meshText.toStdString(), "3x32x64");
  REQUIRE(c.mismatch.empty());
  REQUIRE(c.measured_source.find("tessera train") != std::string::npos);
  REQUIRE(c.measured.ranks == 2);
  REQUIRE(c.measured.steps == 3);
  REQUIRE(c.measured.steps_used == 2);
  REQUIRE(c.simulated.steps == 1);
  for (int p = 0; p < run::kNumPhases; ++p) {
    INFO(run::phase_label(p));
    REQUIRE(c.measured.phase_us[p] > 0);
    REQUIRE(c.simulated.phase_us[p] > 0);
  }
  // The simulated compute phases add up to the simulated kernels per rank.
  double kernels = 0;
  for (const core::TraceEvent& e : snap->result.trace)
    if (e.ph == 'X' && e.cat == "compute") kernels += e.dur_us;
  REQUIRE_THAT(c.simulated.phase_us[run::kForward] + c.simulated.phase_us[run::kBackward] + c.simulated.phase_us[run::kOptimizer],
               WithinRel(kernels / 2, 1e-9));
  REQUIRE_THAT(c.simulated.iteration_us, WithinRel(snap->result.iteration_ps / 1e6, 1e-6));
  // Same layer groups on both sides, in the same order.
  REQUIRE(c.measured.group_us.size() == c.simulated.group_us.size());
  for (std::size_t i = 0; i < c.measured.group_us.size(); ++i)
    REQUIRE(c.measured.group_us[i].first == c.simulated.group_us[i].first);
  REQUIRE(c.rows.size() == 1 + run::kNumPhases + c.measured.group_us.size());
  REQUIRE(std::isfinite(c.rows[0].error_pct()));
  // A run of another configuration is flagged.
  const run::Comparison other = run::compare_traces(measured, snap->result.trace, snap->modelName.toStdString(), "sp=4", "3x64x64");
  REQUIRE(other.mismatch.find("mesh sp=2 vs sp=4") != std::string::npos);
  REQUIRE(other.mismatch.find("input") != std::string::npos);

  SECTION("the compare view shows it; a malformed file is refused with the reader's message") {
    CompareView view;
    view.resize(1000, 600);
    view.setSnapshot(snap);
    REQUIRE_FALSE(view.comparison().has_value());
    view.openMeasured(path);
    REQUIRE(view.comparison().has_value());
    REQUIRE(view.comparison()->measured.steps == 3);
    REQUIRE_FALSE(view.grab().isNull());
    QFile bad(dir.filePath("bad.json"));
    REQUIRE(bad.open(QIODevice::WriteOnly));
    bad.write(R"({"traceEvents":[{"ph":"X","name":"add","pid":0}]})");
    bad.close();
    std::string msg;
    try {
      view.openMeasured(bad.fileName());
    } catch (const Error& e) {
      msg = e.what();
    }
    REQUIRE_THAT(msg, Contains("traceEvents[0]: field 'tid' is missing"));
    REQUIRE(view.comparison().has_value());  // the previous comparison stays
  }
}

TEST_CASE("the timeline marks exactly the simulator's critical path", "[gui][critical]") {
  const auto snap = simulate(tinyConfig());
  REQUIRE(snap->ok());
  const auto& path = snap->result.critical_path;
  REQUIRE_FALSE(path.empty());
  std::size_t expected = 0;
  sim::Picos total = 0;
  for (const auto& s : path) {
    expected += s.stream == "halo" ? 2 : 1;
    total += s.dur_ps() + s.wait_ps;
  }
  REQUIRE(total == snap->result.iteration_ps);
  std::size_t marked = 0;
  for (const TimelineEvent& e : snap->timeline.events) marked += e.critical ? 1 : 0;
  REQUIRE(marked == expected);
}

TEST_CASE("teaching: the steps of a sharded convolution hold core's real numbers", "[gui][teaching]") {
  const TeachingExample ex = buildTeachingExample(3, 6, 12);
  REQUIRE(ex.numRanks == 3);
  REQUIRE(ex.steps.size() == 9);
  REQUIRE(ex.sharedOpsDiff == 0);  // the steps agree with nn::conv2d_forward / conv2d_backward
  REQUIRE(ex.halos.size() == 4);   // both directions across the two inner boundaries
  REQUIRE(ex.gradients.size() == 4);

  // The float64 reference convolution of the whole input.
  test::ref::Conv2d rc;
  rc.h = 6;
  rc.w = 12;
  rc.kh = rc.kw = 3;
  rc.ph = rc.pw = 1;
  const std::vector<double> y = test::ref::conv2d_forward(rc, ex.x, ex.weight, {});
  const test::ref::Conv2dGrads g = test::ref::conv2d_backward(rc, ex.x, ex.weight, ex.dy);
  bool cropMatters = false;
  for (const TeachRank& r : ex.ranks) {
    REQUIRE(r.input.cols() == 4);
    for (std::int64_t i = 0; i < 6; ++i)
      for (std::int64_t j = r.input.box.r[3].begin; j < r.input.box.r[3].end; ++j) {
        REQUIRE(r.input.at(i, j) == ex.x[i * 12 + j]);
        REQUIRE(r.output.at(i, j) == y[i * 12 + j]);  // cropped outputs: the unsharded convolution
        REQUIRE(r.dx.at(i, j) == g.dx[i * 12 + j]);   // halo gradients added: the unsharded gradient
      }
    for (std::int64_t i = 0; i < 6; ++i)
      for (std::int64_t j = r.convolved.box.r[3].begin; j < r.convolved.box.r[3].end; ++j) {
        REQUIRE(r.buffer.at(i, j) == ex.x[i * 12 + j]);  // own columns and received halos
        if (!r.output.contains(i, j) && r.convolved.at(i, j) != y[i * 12 + j]) cropMatters = true;
      }
  }
  REQUIRE(cropMatters);  // the columns the crop drops are wrong where the buffer ends
  // dx = own part of the buffer gradient + the gradients the neighbours sent back.
  for (const TeachRank& r : ex.ranks)
    for (std::int64_t i = 0; i < 6; ++i)
      for (std::int64_t j = r.input.box.r[3].begin; j < r.input.box.r[3].end; ++j) {
        double sum = r.dbuffer.at(i, j);
        for (const TeachMessage& m : ex.gradients)
          if (m.to == r.rank && m.grid.contains(i, j)) sum += m.grid.at(i, j);
        REQUIRE(r.dx.at(i, j) == sum);
      }
  for (const TeachMessage& m : ex.halos) {
    REQUIRE(std::abs(m.from - m.to) == 1);
    REQUIRE(m.grid.cols() == 1);
    REQUIRE(m.grid.rows() == 6);
  }
}

TEST_CASE("teaching view: previous, next and play step through the example", "[gui][teaching]") {
  guiApp();
  TeachingView v;
  v.resize(1000, 700);
  REQUIRE(v.stepCount() == 9);
  REQUIRE(v.step() == 0);
  v.previous();
  REQUIRE(v.step() == 0);
  v.next();
  v.next();
  REQUIRE(v.step() == 2);
  v.setStep(42);
  REQUIRE(v.step() == 8);
  v.setPlaying(true, 10);
  REQUIRE(v.playing());
  QElapsedTimer t;
  t.start();
  while (v.step() == 8 && t.elapsed() < 5000) QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents, 20);
  REQUIRE(v.step() != 8);  // wrapped around to the start
  v.setPlaying(false);
  REQUIRE_FALSE(v.playing());
  std::set<QRgb> colours;
  for (int s = 0; s < v.stepCount(); ++s) {
    v.setStep(s);
    const QImage img = v.grab().toImage();
    for (int y = 0; y < img.height(); y += 5)
      for (int x = 0; x < img.width(); x += 5) colours.insert(img.pixel(x, y));
  }
  REQUIRE(colours.size() > 20);
}
