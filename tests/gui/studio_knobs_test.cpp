// Every value the Configuration panel offers renders every view: each combo box, spin box and check
// box of the panel, varied alone from the studio's default configuration through the widget itself,
// gives a snapshot without an error that every view shows, and a plan; an item the panel disables
// is one the simulator refuses; the precision knob halves the activation and halo bytes the views show.
#include <QAbstractItemModel>
#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QJsonObject>
#include <QJsonValue>
#include <QSpinBox>
#include <QTabWidget>
#include <functional>

#include "config_panel.hpp"
#include "gui_app.hpp"
#include "main_window.hpp"
#include "planner_view.hpp"
#include "support/catch.hpp"
#include "tessera/core/error.hpp"
#include "tessera/nn/trainer.hpp"
#include "tessera/sim/fold.hpp"
#include "views_common.hpp"

using namespace tessera;
using namespace tessera::studio;

namespace {

/// One value a knob offers: how to select it on the widget, and whether the widget lets the user.
struct Offer {
  QString knob, value;
  std::function<void()> select;
  bool enabled = true;
  QString why;  ///< a disabled item's tooltip
};

/// Every value the panel's widgets offer, read from the widgets: each combo-box item, a spin box's
/// minimum and maximum, a check box's other state. Line edits take free text and offer none.
std::vector<Offer> offers(ConfigPanel* panel) {
  std::vector<Offer> out;
  for (QComboBox* c : panel->findChildren<QComboBox*>()) {
    const QAbstractItemModel* m = c->model();
    for (int i = 0; i < c->count(); ++i) {
      const QModelIndex ix = m->index(i, c->modelColumn());
      out.push_back({c->objectName(), c->itemText(i), [c, i] { c->setCurrentIndex(i); },
                     (m->flags(ix) & Qt::ItemIsEnabled) != 0, m->data(ix, Qt::ToolTipRole).toString()});
    }
  }
  for (QSpinBox* s : panel->findChildren<QSpinBox*>())
    for (int v : {s->minimum(), s->maximum()})
      out.push_back({s->objectName(), QString::number(v), [s, v] { s->setValue(v); }, true, {}});
  for (QCheckBox* b : panel->findChildren<QCheckBox*>()) {
    const bool v = !b->isChecked();
    out.push_back({b->objectName(), v ? "on" : "off", [b, v] { b->setChecked(v); }, true, {}});
  }
  return out;
}

/// Selects `o` through its widget and waits for the window's snapshot of the panel's configuration.
StudioConfig selectAndSimulate(MainWindow& w, const Offer& o) {
  int emitted = 0;
  const auto conn = QObject::connect(w.panel(), &ConfigPanel::configChanged, [&] { ++emitted; });
  o.select();
  QObject::disconnect(conn);
  const StudioConfig c = w.panel()->config();
  if (emitted == 0) w.setConfig(c);  // the value was selected already: the widget emitted nothing
  REQUIRE(waitFor([&] { return w.snapshot() && w.snapshot()->config == c; }));
  return c;
}

/// Every view of `w` shows its snapshot without an error, paints, and the planner plans it.
void requireEveryViewRenders(MainWindow& w) {
  const Snapshot* s = w.snapshot();
  INFO("simulation error: " << s->error.toStdString());
  REQUIRE(s->ok());
  REQUIRE_FALSE(w.panel()->status().contains("error", Qt::CaseInsensitive));
  for (int i = 0; i < w.tabs()->count(); ++i) {
    w.tabs()->setCurrentIndex(i);
    INFO("view " << MainWindow::viewNames().value(i).toStdString());
    if (auto* v = qobject_cast<SnapshotView*>(w.tabs()->widget(i))) {
      REQUIRE(v->hasData());
      REQUIRE(v->snapshot() == s);
    }
    REQUIRE_FALSE(w.grab().isNull());
  }
  int planned = 0;
  const auto conn = QObject::connect(w.planner(), &PlannerView::planned, [&] { ++planned; });
  w.planner()->runPlanner();
  REQUIRE(waitFor([&] { return planned > 0; }));
  QObject::disconnect(conn);
  INFO("planner error: " << w.planner()->error().toStdString());
  REQUIRE(w.planner()->error().isEmpty());
  REQUIRE(w.planner()->model()->rowCount() > 0);
}

}  // namespace

TEST_CASE("every value every knob of the panel offers renders every view", "[gui]") {
  guiApp();
  MainWindow w;
  w.resize(1200, 800);
  w.show();
  const StudioConfig base;  // the studio's default configuration
  w.setConfig(base);
  REQUIRE(waitFor([&] { return w.snapshot() && w.snapshot()->config == base; }));
  requireEveryViewRenders(w);

  const std::vector<Offer> all = offers(w.panel());
  QStringList knobs;
  for (const Offer& o : all)
    if (!knobs.contains(o.knob)) knobs << o.knob;
  // The panel's knobs with values to offer; a widget without a name would be tested unnamed.
  for (const char* k :
       {"model", "batch", "shard", "checkpointing", "optimizer", "topology", "dtype", "precision",
        "grad_reduce_dtype", "overlap", "micro_batches", "schedule"})
    REQUIRE(knobs.contains(k));
  REQUIRE_FALSE(knobs.contains(QString()));

  int rendered = 0;
  for (const Offer& o : all) {
    INFO(o.knob.toStdString() << " = " << o.value.toStdString());
    w.setConfig(base, /*simulate=*/false);
    if (!o.enabled) {
      // Disabled because it cannot work here: the simulator refuses it, and the tooltip says why.
      QJsonObject j = base.toJson();
      j.insert(o.knob, o.value);
      REQUIRE_FALSE(o.why.isEmpty());
      REQUIRE_FALSE(simulate(StudioConfig::fromJson(j))->ok());
      continue;
    }
    const StudioConfig c = selectAndSimulate(w, o);
    const QJsonValue field = c.toJson().value(o.knob);  // the panel's configuration holds the value
    REQUIRE((field.isBool() ? QString(field.toBool() ? "on" : "off")
             : field.isDouble() ? QString::number(field.toInt())
                                : field.toString()) == o.value);
    requireEveryViewRenders(w);
    ++rendered;
  }
  REQUIRE(rendered > 20);
}

TEST_CASE("the panel's dtypes are the ones core trains in, and core refuses the others", "[gui]") {
  guiApp();
  ConfigPanel panel;
  auto* dtype = panel.findChild<QComboBox*>("dtype");
  REQUIRE(dtype != nullptr);
  QStringList offered, trainable;
  for (int i = 0; i < dtype->count(); ++i) offered << dtype->itemText(i);
  for (core::DType t : nn::training_dtypes()) trainable << QString::fromLatin1(core::dtype_name(t).data());
  REQUIRE(offered.join(", ").toStdString() == trainable.join(", ").toStdString());
  REQUIRE(offered.value(0) == "f32");  // the reference dtype comes first (the default)

  // The trainer's own check: the replay runs Trainer::step, which refuses bf16 master weights naming
  // what works (16-bit training is the precision knob: bf16 activations over f32 master weights).
  nn::TrainOptions t;
  t.model = nn::model_preset("convnext-atto");
  t.input = {3, 64, 256};
  t.batch = 1;
  t.dtype = core::DType::BF16;
  try {
    sim::replay_folded(t, core::DeviceMesh::parse("sp=2"));
    FAIL("training in bf16 was not refused");
  } catch (const Unsupported& e) {
    const std::string m = e.what();
    INFO(m);
    REQUIRE(m.find("bf16") != std::string::npos);
    REQUIRE(m.find(trainable.join(", ").toStdString()) != std::string::npos);
  }
}

TEST_CASE("the precision knob: bf16 and fp16 halve the activation memory and the halo bytes the views show",
          "[gui]") {
  guiApp();
  ConfigPanel panel;
  auto* precision = panel.findChild<QComboBox*>("precision");
  auto* dtype = panel.findChild<QComboBox*>("dtype");
  REQUIRE(precision != nullptr);
  REQUIRE(dtype != nullptr);
  QStringList offered;
  for (int i = 0; i < precision->count(); ++i) offered << precision->itemText(i);
  REQUIRE(offered.join(", ").toStdString() == "fp32, bf16, fp16");
  REQUIRE(precision->currentText() == "fp32");  // the default

  StudioConfig c;  // ConvNeXt-T 3x512x2048 on sp=4 of a DGX-A100
  const auto full = simulate(c);
  INFO(full->error.toStdString());
  REQUIRE(full->ok());
  const int act = static_cast<int>(core::MemCategory::Activation);
  const int halo = static_cast<int>(core::MemCategory::HaloBuffer);
  for (const char* p : {"bf16", "fp16"}) {
    INFO(p);
    // Through the widget: the panel's configuration carries the precision to the run description.
    panel.setConfig(StudioConfig{});
    precision->setCurrentIndex(precision->findText(p));
    const StudioConfig half = panel.config();
    REQUIRE(half.precision == p);
    REQUIRE(half.toSpec().precision == p);
    REQUIRE(StudioConfig::fromJson(half.toJson()) == half);
    const auto s = simulate(half);
    INFO(s->error.toStdString());
    REQUIRE(s->ok());
    REQUIRE(s->memory.size() == full->memory.size());
    for (std::size_t r = 0; r < s->memory.size(); ++r) {
      // 16-bit activations and saved tensors (the f32 input images and norm statistics stay).
      REQUIRE(s->memory[r].peakBytes[act] < full->memory[r].peakBytes[act]);
      REQUIRE(static_cast<double>(s->memory[r].peakBytes[act]) <= 0.6 * full->memory[r].peakBytes[act]);
      // Halo buffers in 16 bits: half.
      REQUIRE(2 * s->memory[r].peakBytes[halo] == full->memory[r].peakBytes[halo]);
      // Parameters stay f32 master weights.
      REQUIRE(s->memory[r].peakBytes[static_cast<int>(core::MemCategory::Parameter)] ==
              full->memory[r].peakBytes[static_cast<int>(core::MemCategory::Parameter)]);
    }
    // The shard map's halo regions: the same boxes, 2 bytes an element.
    REQUIRE(s->shards.layers.size() == full->shards.layers.size());
    std::int64_t halfBytes = 0, fullBytes = 0;
    for (std::size_t l = 0; l < s->shards.layers.size(); ++l)
      for (std::size_t r = 0; r < s->shards.layers[l].shards.size(); ++r) {
        const ShardInfo& a = s->shards.layers[l].shards[r];
        const ShardInfo& b = full->shards.layers[l].shards[r];
        REQUIRE(a.recvs.size() == b.recvs.size());
        for (std::size_t k = 0; k < a.recvs.size(); ++k) REQUIRE(2 * a.recvs[k].bytes == b.recvs[k].bytes);
        halfBytes += a.recvBytes() + a.sendBytes();
        fullBytes += b.recvBytes() + b.sendBytes();
      }
    REQUIRE(fullBytes > 0);
    REQUIRE(2 * halfBytes == fullBytes);
    // Convolutions at the A100's 16-bit tensor-core peak, half the bytes moved: a shorter iteration.
    REQUIRE(s->result.iteration_ps < full->result.iteration_ps);
  }

  // Mixed precision keeps f32 master weights: with dtype f64 the 16-bit items are disabled, saying
  // why, and the simulator refuses the combination too.
  StudioConfig f64;
  f64.dtype = "f64";
  panel.setConfig(f64);
  const QModelIndex bf16 = precision->model()->index(precision->findText("bf16"), 0);
  REQUIRE_FALSE(precision->model()->flags(bf16) & Qt::ItemIsEnabled);
  REQUIRE(precision->model()->data(bf16, Qt::ToolTipRole).toString().contains("dtype f32"));
  f64.precision = "bf16";
  const auto refused = simulate(f64);
  REQUIRE_FALSE(refused->ok());
  INFO(refused->error.toStdString());
  REQUIRE(refused->error.contains("f32 master weights"));
  // And with a 16-bit precision chosen, f64 is the dtype item disabled.
  StudioConfig bf;
  bf.precision = "bf16";
  panel.setConfig(bf);
  const QModelIndex f64Item = dtype->model()->index(dtype->findText("f64"), 0);
  REQUIRE_FALSE(dtype->model()->flags(f64Item) & Qt::ItemIsEnabled);
  REQUIRE(dtype->model()->flags(dtype->model()->index(dtype->findText("f32"), 0)) & Qt::ItemIsEnabled);
}

TEST_CASE("a topology with fewer devices than the mesh has ranks is disabled, and says why", "[gui]") {
  guiApp();
  ConfigPanel panel;
  auto* topology = panel.findChild<QComboBox*>("topology");
  REQUIRE(topology != nullptr);
  const int cpu = topology->findText("cpu-host");  // one device
  REQUIRE(cpu >= 0);
  auto enabled = [&](int i) {
    return (topology->model()->flags(topology->model()->index(i, 0)) & Qt::ItemIsEnabled) != 0;
  };
  StudioConfig c;  // sp=4
  panel.setConfig(c);
  REQUIRE_FALSE(enabled(cpu));
  const QString why = topology->itemData(cpu, Qt::ToolTipRole).toString();
  INFO(why.toStdString());
  REQUIRE(why.contains("1 device"));
  REQUIRE(why.contains("sp=4"));
  REQUIRE(enabled(topology->findText("dgx-a100")));
  c.mesh = "sp=1";
  panel.setConfig(c);
  REQUIRE(enabled(cpu));
  c.topology = "cpu-host";
  c.model = "convnext-atto";
  c.input = "3x64x256";
  const auto s = simulate(c);
  INFO(s->error.toStdString());
  REQUIRE(s->ok());
  c.mesh = "sp=x";  // a mesh that does not parse disables nothing (the simulator reports it)
  panel.setConfig(c);
  REQUIRE(enabled(cpu));
}
