// ConfigPanel: a form over StudioConfig; presets come from core (models, dtypes, precisions) and
// sim (topologies); a topology with fewer devices than the mesh has ranks is disabled, and so are
// the 16-bit precisions with a dtype other than f32.
#include "config_panel.hpp"

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QVBoxLayout>

#include "tessera/nn/models.hpp"

namespace tessera::studio {

namespace {

QComboBox* combo(const QStringList& items, bool editable) {
  auto* c = new QComboBox;
  c->addItems(items);
  c->setEditable(editable);
  c->setInsertPolicy(QComboBox::NoInsert);
  return c;
}

QStringList toQt(const std::vector<std::string>& v) {
  QStringList out;
  for (const std::string& s : v) out << QString::fromStdString(s);
  return out;
}

void setItemEnabled(QComboBox* c, int i, bool enabled, const QString& why) {
  QStandardItem* item = qobject_cast<QStandardItemModel*>(c->model())->item(i);
  item->setEnabled(enabled);
  item->setToolTip(enabled ? QString() : why);
}

void setComboText(QComboBox* c, const QString& text) {
  const int i = c->findText(text);
  if (i >= 0) c->setCurrentIndex(i);
  else if (c->isEditable()) c->setEditText(text);
}

}  // namespace

ConfigPanel::ConfigPanel(QWidget* parent) : QWidget(parent) {
  model_ = combo(toQt(nn::model_preset_names()), true);
  model_->setToolTip(QStringLiteral("A model preset, or the path of a JSON model file"));
  input_ = new QLineEdit;
  input_->setToolTip(QStringLiteral("C×H×W of one image, e.g. 3x512x2048"));
  batch_ = new QSpinBox;
  batch_->setRange(1, 4096);
  mesh_ = new QLineEdit;
  mesh_->setToolTip(QStringLiteral("dp × spatial mesh: sp=4, dp=2,sp=2, or tiles sp_h=2,sp_w=2"));
  shard_ = combo({"W", "H"}, false);
  shard_->setToolTip(QStringLiteral("The dimension a mesh dim named sp splits (sp_h/sp_w tile both)"));
  checkpointing_ = combo({"none", "block", "stage"}, false);
  optimizer_ = combo({"adamw", "sgd"}, false);
  QStringList topos;
  for (const std::string& n : sim::Topology::preset_names())
    if (n.find('N') == std::string::npos) topos << QString::fromStdString(n);
  topos << "dgx-a100:2" << "dgx-h100:2";
  topology_ = combo(topos, true);
  for (const QString& t : topos) topologyDevices_ << presetDevices(t);
  topology_->setToolTip(QStringLiteral("A topology preset, or the path of a topology JSON file"));
  dtype_ = combo(trainableDtypes(), false);
  dtype_->setToolTip(QStringLiteral("The dtypes the trainer trains in (core's nn::training_dtypes): the master "
                                    "weights, gradients and optimizer state"));
  precision_ = combo(precisionNames(), false);
  precision_->setToolTip(QStringLiteral(
      "fp32, or bf16 / fp16 mixed precision: activations, saved tensors and halos in 16 bits (half the "
      "bytes), convolutions at the device's 16-bit peak, f32 master weights"));
  gradReduce_ = combo(precisionNames(), false);
  gradReduce_->setToolTip(QStringLiteral("What gradient buckets are all-reduced in (bf16 / fp16: half the bytes)"));
  overlap_ = new QCheckBox(QStringLiteral("overlap halo exchange and all-reduce"));
  task_ = combo({"classify", "segment"}, false);
  task_->setToolTip(QStringLiteral("The head and loss: classification (one label per image) or segmentation (per pixel)"));
  classes_ = new QSpinBox;
  classes_->setRange(2, 100000);
  device_ = combo(QStringList{QString()} + toQt(sim::DeviceCatalog().names()), false);
  device_->setToolTip(QStringLiteral("The device model of every rank; empty: the topology's own"));
  tf32_ = new QCheckBox(QStringLiteral("time convolutions at the TF32 tensor-core peak"));
  bucketMib_ = new QSpinBox;
  bucketMib_->setRange(1, 1024);
  bucketMib_->setSuffix(QStringLiteral(" MiB"));
  bucketMib_->setToolTip(QStringLiteral("Gradient all-reduce bucket size"));
  microBatches_ = new QSpinBox;
  microBatches_->setRange(1, 1);  // up to the batch: enableMicroBatches
  microBatches_->setToolTip(QStringLiteral(
      "Micro-batches per step (gradient accumulation; with a mesh dim pp, what fills the "
      "pipeline): must divide the batch"));
  schedule_ = combo({"1f1b", "gpipe"}, false);
  schedule_->setToolTip(QStringLiteral(
      "With a mesh dim pp: 1f1b (backwards as soon as the last stage can; fewer micro-batches in "
      "flight) or gpipe (every forward first)"));
  stageStarts_ = new QLineEdit;
  stageStarts_->setPlaceholderText(QStringLiteral("balanced"));
  stageStarts_->setToolTip(QStringLiteral(
      "With a mesh dim pp: the unit where each stage after the first begins, e.g. 4,9 for pp=3; "
      "empty: balanced by cost"));
  calibration_ = new QLineEdit;
  calibration_->setPlaceholderText(QStringLiteral("none (built-in figures)"));
  calibration_->setToolTip(QStringLiteral(
      "A tessera calibrate file (as tessera sim run --calibration): this machine's measured cpu-host "
      "device, links and kernel rates; empty for the built-in figures"));
  auto* modelFile = new QPushButton(QStringLiteral("…"));
  modelFile->setToolTip(QStringLiteral("Choose a JSON model file"));
  auto* topoFile = new QPushButton(QStringLiteral("…"));
  topoFile->setToolTip(QStringLiteral("Choose a topology JSON file"));
  auto* calibrationFile = new QPushButton(QStringLiteral("…"));
  calibrationFile->setToolTip(QStringLiteral("Choose a calibration file (tessera calibrate --out)"));
  for (auto* b : {modelFile, topoFile, calibrationFile}) b->setMaximumWidth(28);
  auto row = [](QWidget* a, QWidget* b) {
    auto* w = new QWidget;
    auto* l = new QHBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    l->addWidget(a, 1);
    l->addWidget(b);
    return w;
  };
  auto* form = new QFormLayout;
  form->addRow(QStringLiteral("Model"), row(model_, modelFile));
  form->addRow(QStringLiteral("Input C×H×W"), input_);
  form->addRow(QStringLiteral("Batch"), batch_);
  form->addRow(QStringLiteral("Mesh"), mesh_);
  form->addRow(QStringLiteral("Shard"), shard_);
  form->addRow(QStringLiteral("Checkpointing"), checkpointing_);
  form->addRow(QStringLiteral("Optimizer"), optimizer_);
  form->addRow(QStringLiteral("Topology"), row(topology_, topoFile));
  form->addRow(QStringLiteral("dtype"), dtype_);
  form->addRow(QStringLiteral("Precision"), precision_);
  form->addRow(QStringLiteral("Grad reduce"), gradReduce_);
  form->addRow(QStringLiteral("Task"), task_);
  form->addRow(QStringLiteral("Classes"), classes_);
  form->addRow(QStringLiteral("Device"), device_);
  form->addRow(QStringLiteral("Bucket"), bucketMib_);
  form->addRow(QStringLiteral("Micro-batches"), microBatches_);
  form->addRow(QStringLiteral("Schedule"), schedule_);
  form->addRow(QStringLiteral("Stage starts"), stageStarts_);
  form->addRow(overlap_);
  form->addRow(tf32_);
  form->addRow(QStringLiteral("Calibration"), row(calibration_, calibrationFile));
  status_ = new QLabel;
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* v = new QVBoxLayout(this);
  auto* title = new QLabel(QStringLiteral("<b>Configuration</b>"));
  v->addWidget(title);
  v->addLayout(form);
  v->addWidget(status_);
  v->addStretch(1);
  setConfig(StudioConfig{});

  // The JSON field each widget edits names it (the tests find the knobs by these names).
  const std::pair<QWidget*, const char*> names[] = {{model_, "model"},
                                                    {input_, "input"},
                                                    {batch_, "batch"},
                                                    {mesh_, "mesh"},
                                                    {shard_, "shard"},
                                                    {checkpointing_, "checkpointing"},
                                                    {optimizer_, "optimizer"},
                                                    {topology_, "topology"},
                                                    {dtype_, "dtype"},
                                                    {precision_, "precision"},
                                                    {gradReduce_, "grad_reduce_dtype"},
                                                    {overlap_, "overlap"},
                                                    {calibration_, "calibration"},
                                                    {task_, "task"},
                                                    {classes_, "classes"},
                                                    {device_, "device"},
                                                    {tf32_, "tf32"},
                                                    {bucketMib_, "bucket_mib"},
                                                    {microBatches_, "micro_batches"},
                                                    {schedule_, "schedule"},
                                                    {stageStarts_, "stage_starts"}};
  for (const auto& [w, n] : names) w->setObjectName(QString::fromLatin1(n));

  connect(model_, &QComboBox::currentTextChanged, this, [this] { emitChanged(); });
  connect(input_, &QLineEdit::editingFinished, this, [this] { emitChanged(); });
  connect(batch_, &QSpinBox::valueChanged, this, [this] {
    enableMicroBatches();
    enableModels();
    emitChanged();
  });
  connect(task_, &QComboBox::currentTextChanged, this, [this] { enableModels(); });
  for (QSpinBox* b : {classes_, bucketMib_, microBatches_})
    connect(b, &QSpinBox::valueChanged, this, [this] { emitChanged(); });
  connect(mesh_, &QLineEdit::editingFinished, this, [this] {
    enableTopologies();
    emitChanged();
  });
  for (QComboBox* c : {shard_, checkpointing_, optimizer_, topology_, task_, device_, schedule_})
    connect(c, &QComboBox::currentTextChanged, this, [this] { emitChanged(); });
  for (QComboBox* c : {dtype_, precision_, gradReduce_})
    connect(c, &QComboBox::currentTextChanged, this, [this] {
      enablePrecisions();
      emitChanged();
    });
  for (QCheckBox* b : {overlap_, tf32_}) connect(b, &QCheckBox::toggled, this, [this] { emitChanged(); });
  for (QLineEdit* e : {calibration_, stageStarts_})
    connect(e, &QLineEdit::editingFinished, this, [this] { emitChanged(); });
  connect(modelFile, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, QStringLiteral("Model JSON"), {}, QStringLiteral("JSON (*.json)"));
    if (!f.isEmpty()) model_->setEditText(f);
  });
  connect(topoFile, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, QStringLiteral("Topology JSON"), {}, QStringLiteral("JSON (*.json)"));
    if (!f.isEmpty()) topology_->setEditText(f);
  });
  connect(calibrationFile, &QPushButton::clicked, this, [this] {
    const QString f =
        QFileDialog::getOpenFileName(this, QStringLiteral("Calibration file"), {}, QStringLiteral("JSON (*.json)"));
    if (f.isEmpty()) return;
    calibration_->setText(f);
    emitChanged();
  });
}

StudioConfig ConfigPanel::config() const {
  StudioConfig c;
  c.model = model_->currentText().trimmed();
  c.input = input_->text().trimmed();
  c.batch = batch_->value();
  c.mesh = mesh_->text().trimmed();
  c.shard = shard_->currentText();
  c.checkpointing = checkpointing_->currentText();
  c.optimizer = optimizer_->currentText();
  c.topology = topology_->currentText().trimmed();
  c.dtype = dtype_->currentText();
  c.precision = precision_->currentText();
  c.gradReduce = gradReduce_->currentText();
  c.overlap = overlap_->isChecked();
  c.task = task_->currentText();
  c.classes = classes_->value();
  c.device = device_->currentText();
  c.tf32 = tf32_->isChecked();
  c.bucketMib = bucketMib_->value();
  c.microBatches = microBatches_->value();
  c.schedule = schedule_->currentText();
  c.stageStarts = stageStarts_->text().trimmed();
  c.calibration = calibration_->text().trimmed();
  return c;
}

void ConfigPanel::setConfig(const StudioConfig& c) {
  quiet_ = true;
  setComboText(model_, c.model);
  input_->setText(c.input);
  batch_->setValue(c.batch);
  mesh_->setText(c.mesh);
  setComboText(shard_, c.shard);
  setComboText(checkpointing_, c.checkpointing);
  setComboText(optimizer_, c.optimizer);
  setComboText(topology_, c.topology);
  setComboText(dtype_, c.dtype);
  setComboText(precision_, c.precision);
  setComboText(gradReduce_, c.gradReduce);
  overlap_->setChecked(c.overlap);
  setComboText(task_, c.task);
  classes_->setValue(c.classes);
  setComboText(device_, c.device);
  tf32_->setChecked(c.tf32);
  bucketMib_->setValue(c.bucketMib);
  enableMicroBatches();
  microBatches_->setValue(c.microBatches);
  setComboText(schedule_, c.schedule);
  stageStarts_->setText(c.stageStarts);
  calibration_->setText(c.calibration);
  enableTopologies();
  enablePrecisions();
  enableModels();
  quiet_ = false;
}

void ConfigPanel::enableTopologies() {
  auto* items = qobject_cast<QStandardItemModel*>(topology_->model());
  const QString mesh = mesh_->text().trimmed();
  const int ranks = meshRanks(mesh);
  for (int i = 0; i < topology_->count(); ++i) {
    QStandardItem* item = items->item(i);
    const int devices = topologyDevices_.value(i);
    const bool fits = ranks == 0 || devices == 0 || devices >= ranks;
    item->setEnabled(fits);
    item->setToolTip(fits ? QString()
                          : QStringLiteral("%1 has %2 device(s) but the mesh %3 needs %4; choose a smaller mesh")
                                .arg(item->text()).arg(devices).arg(mesh).arg(ranks));
  }
}

void ConfigPanel::enableModels() {
  for (int i = 0; i < model_->count(); ++i) {
    nn::ModelSpec m;
    try {
      m = nn::model_preset(model_->itemText(i).toStdString());
    } catch (const std::exception&) {
      continue;  // a model file: the simulator's message says what is wrong with it
    }
    QString why;
    if (m.views > 1 && batch_->value() % m.views != 0)
      why =
          QStringLiteral(
              "%1 fuses %2 camera views per scene: the batch (%3 images) must be a multiple of %2")
              .arg(model_->itemText(i))
              .arg(m.views)
              .arg(batch_->value());
    else if (m.views > 1 && task_->currentText() != QStringLiteral("classify"))
      why =
          QStringLiteral("%1 classifies scenes: set the task to classify").arg(model_->itemText(i));
    setItemEnabled(model_, i, why.isEmpty(), why);
  }
}

void ConfigPanel::enableMicroBatches() {
  // At most one micro-batch per sample; whether the count divides the batch is the run layer's
  // check, whose message the status line shows.
  const QSignalBlocker quiet(microBatches_);  // the batch's own change is what emits
  microBatches_->setMaximum(std::max(1, batch_->value()));
}

void ConfigPanel::enablePrecisions() {
  const QString dtype = dtype_->currentText();
  for (QComboBox* c : {precision_, gradReduce_})
    for (int i = 0; i < c->count(); ++i) {
      const QString why = precisionConflict(c->itemText(i), dtype);
      setItemEnabled(c, i, why.isEmpty(), why);
    }
  for (int i = 0; i < dtype_->count(); ++i) {
    QString why = precisionConflict(precision_->currentText(), dtype_->itemText(i));
    if (why.isEmpty()) why = precisionConflict(gradReduce_->currentText(), dtype_->itemText(i));
    setItemEnabled(dtype_, i, why.isEmpty(), why);
  }
}

void ConfigPanel::setStatus(const QString& text, bool error) {
  status_->setStyleSheet(error ? QStringLiteral("color: #b41e1e;") : QString());
  status_->setText(text);
}

QString ConfigPanel::status() const { return status_->text(); }

void ConfigPanel::emitChanged() {
  if (!quiet_) emit configChanged(config());
}

}  // namespace tessera::studio
