// StudioConfig ↔ JSON and ↔ run::RunSpec (which parses and checks every field), and its
// resolution through run::resolve_sim, as `tessera sim run` does; the dtypes and precisions offered.
#include "studio_config.hpp"

#include <QJsonDocument>
#include <QJsonParseError>
#include <QStringList>

#include "tessera/core/error.hpp"
#include "tessera/nn/precision.hpp"

namespace tessera::studio {

namespace {

[[noreturn]] void fail(const QString& origin, const QString& what) {
  throw InvalidArgument((origin + QStringLiteral(": ") + what).toStdString());
}

QString q(const std::string& s) { return QString::fromStdString(s); }

/// The studio's defaults as a run description: ConvNeXt-T at 3x512x2048, batch 1, sp=4.
run::RunSpec studioDefaults() {
  run::RunSpec s = run::RunSpec::for_simulation();
  s.model = "convnext-t";
  s.input = "3x512x2048";
  s.batch = 1;
  return s;
}

}  // namespace

QStringList trainableDtypes() {
  QStringList out;
  for (core::DType t : nn::training_dtypes())
    out << QString::fromLatin1(core::dtype_name(t).data(), core::dtype_name(t).size());
  return out;
}

QStringList precisionNames() {
  QStringList out;
  for (nn::Precision p : {nn::Precision::FP32, nn::Precision::BF16, nn::Precision::FP16})
    out << QString::fromLatin1(nn::precision_name(p).data(), nn::precision_name(p).size());
  return out;
}

QString precisionConflict(const QString& precision, const QString& dtype) {
  const auto p = nn::parse_precision(precision.toStdString());
  if (!p || *p == nn::Precision::FP32 || dtype == QStringLiteral("f32")) return {};
  return QStringLiteral("%1 (mixed precision) keeps f32 master weights; choose dtype f32, not %2").arg(precision, dtype);
}

int presetDevices(const QString& topology) {
  try {
    return static_cast<int>(sim::Topology::preset(topology.toStdString()).devices().size());
  } catch (const Error&) {
    return 0;
  }
}

int meshRanks(const QString& mesh) {
  try {
    return core::DeviceMesh::parse(mesh.toStdString()).size();
  } catch (const Error&) {
    return 0;
  }
}

QJsonObject StudioConfig::toJson() const {
  QJsonObject o{{"model", model},
                {"input", input},
                {"batch", batch},
                {"mesh", mesh},
                {"shard", shard},
                {"checkpointing", checkpointing},
                {"optimizer", optimizer},
                {"topology", topology},
                {"dtype", dtype},
                {"precision", precision},
                {"grad_reduce_dtype", gradReduce},
                {"overlap", overlap},
                {"task", task},
                {"classes", classes},
                {"tf32", tf32},
                {"bucket_mib", bucketMib},
                {"micro_batches", microBatches},
                {"schedule", schedule}};
  if (!stageStarts.isEmpty()) o.insert("stage_starts", stageStarts);
  if (!device.isEmpty()) o.insert("device", device);
  if (!calibration.isEmpty()) o.insert("calibration", calibration);
  return o;
}

run::RunSpec StudioConfig::toSpec() const {
  run::RunSpec s = run::RunSpec::for_simulation();
  s.model = model.toStdString();
  s.input = input.toStdString();
  s.batch = batch;
  s.mesh = mesh.toStdString();
  s.shard = shard.toStdString();
  s.checkpointing = checkpointing.toStdString();
  s.optimizer = optimizer.toStdString();
  s.topology = topology.toStdString();
  s.dtype = dtype.toStdString();
  s.precision = precision.toStdString();
  s.grad_reduce_dtype = gradReduce.toStdString();
  s.overlap = overlap;
  s.task = task.toStdString();
  s.classes = classes;
  s.device = device.toStdString();
  s.tf32 = tf32;
  s.bucket_mib = bucketMib;
  s.micro_batches = microBatches;
  s.schedule = schedule.toStdString();
  s.stage_starts = stageStarts.toStdString();
  s.calibration = calibration.toStdString();
  return s;
}

StudioConfig StudioConfig::fromSpec(const run::RunSpec& s) {
  StudioConfig c;
  c.model = q(s.model);
  c.input = q(s.input);
  c.batch = s.batch;
  c.mesh = q(s.mesh);
  c.shard = q(s.shard);
  c.checkpointing = q(s.checkpointing);
  c.optimizer = q(s.optimizer);
  c.topology = q(s.topology);
  c.dtype = q(s.dtype);
  c.precision = q(s.precision);
  c.gradReduce = q(s.grad_reduce_dtype);
  c.overlap = s.overlap;
  c.task = q(s.task);
  c.classes = s.classes;
  c.device = q(s.device);
  c.tf32 = s.tf32;
  c.bucketMib = s.bucket_mib;
  c.microBatches = s.micro_batches;
  c.schedule = q(s.schedule);
  c.stageStarts = q(s.stage_starts);
  c.calibration = q(s.calibration);
  return c;
}

StudioConfig StudioConfig::fromJson(const QJsonObject& o, const QString& origin) {
  QStringList known;
  for (const std::string& f : run::RunSpec::simulation_fields()) known << q(f);
  for (const QString& k : o.keys())
    if (!known.contains(k))
      fail(origin, QStringLiteral("unknown field \"%1\"; known fields: %2").arg(k, known.join(", ")));
  const QByteArray text = QJsonDocument(o).toJson(QJsonDocument::Compact);
  return fromSpec(run::RunSpec::from_json(text.toStdString(), studioDefaults(), origin.toStdString()));
}

StudioConfig StudioConfig::fromJsonText(const QByteArray& text, const QString& origin) {
  QJsonParseError err;
  const QJsonDocument doc = QJsonDocument::fromJson(text, &err);
  if (err.error != QJsonParseError::NoError)
    fail(origin, QStringLiteral("not valid JSON at offset %1: %2").arg(err.offset).arg(err.errorString()));
  if (!doc.isObject()) fail(origin, QStringLiteral("expected a JSON object such as {\"model\": \"convnext-t\"}"));
  return fromJson(doc.object(), origin);
}

ResolvedConfig resolveConfig(const StudioConfig& c) { return run::resolve_sim(c.toSpec()); }

}  // namespace tessera::studio
