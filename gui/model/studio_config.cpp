// StudioConfig ↔ JSON, and its conversion through the CLI's own make_train_config and
// make_sim_setup (topology and calibration).
#include "studio_config.hpp"

#include <QFile>
#include <QJsonDocument>
#include <QJsonParseError>
#include <QStringList>

#include "tessera/core/error.hpp"
#include "sim_setup.hpp"
#include "train_run.hpp"

namespace tessera::studio {

namespace {

[[noreturn]] void fail(const QString& origin, const QString& what) {
  throw InvalidArgument((origin + QStringLiteral(": ") + what).toStdString());
}

QString stringField(const QJsonObject& o, const QString& key, const QString& fallback, const QString& origin) {
  if (!o.contains(key)) return fallback;
  if (!o.value(key).isString()) fail(origin, QStringLiteral("field \"%1\" must be a string").arg(key));
  return o.value(key).toString();
}

/// The trainable dtype named `name`; throws InvalidArgument naming `where` and the dtypes that work.
core::DType trainableDtype(const QString& name, const QString& where) {
  if (const auto t = nn::training_dtype(name.toStdString())) return *t;
  throw InvalidArgument((where + QStringLiteral(" is \"%1\", which the trainer cannot train in (yet); use one of: %2")
                                     .arg(name, QString::fromStdString(nn::training_dtype_names())))
                            .toStdString());
}

}  // namespace

QStringList trainableDtypes() {
  QStringList out;
  for (core::DType t : nn::training_dtypes())
    out << QString::fromLatin1(core::dtype_name(t).data(), core::dtype_name(t).size());
  return out;
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
  QJsonObject o{{"model", model},         {"input", input},
                {"batch", batch},         {"mesh", mesh},
                {"shard", shard},         {"checkpointing", checkpointing},
                {"optimizer", optimizer}, {"topology", topology},
                {"dtype", dtype},         {"overlap", overlap}};
  if (!calibration.isEmpty()) o.insert("calibration", calibration);
  return o;
}

StudioConfig StudioConfig::fromJson(const QJsonObject& o, const QString& origin) {
  static const QStringList known = {"model", "input", "batch", "mesh", "shard", "checkpointing",
                                    "optimizer", "topology", "dtype", "overlap", "calibration"};
  for (const QString& k : o.keys())
    if (!known.contains(k))
      fail(origin, QStringLiteral("unknown field \"%1\"; known fields: %2").arg(k, known.join(", ")));
  StudioConfig c;
  c.model = stringField(o, "model", c.model, origin);
  c.input = stringField(o, "input", c.input, origin);
  c.mesh = stringField(o, "mesh", c.mesh, origin);
  c.shard = stringField(o, "shard", c.shard, origin);
  c.checkpointing = stringField(o, "checkpointing", c.checkpointing, origin);
  c.optimizer = stringField(o, "optimizer", c.optimizer, origin);
  c.topology = stringField(o, "topology", c.topology, origin);
  c.dtype = stringField(o, "dtype", c.dtype, origin);
  trainableDtype(c.dtype, origin + QStringLiteral(": field \"dtype\""));
  c.calibration = stringField(o, "calibration", c.calibration, origin);
  if (o.contains("batch")) {
    const QJsonValue v = o.value("batch");
    if (!v.isDouble() || v.toDouble() != static_cast<double>(v.toInt()) || v.toInt() < 1)
      fail(origin, QStringLiteral("field \"batch\" must be a positive integer"));
    c.batch = v.toInt();
  }
  if (o.contains("overlap")) {
    if (!o.value("overlap").isBool()) fail(origin, QStringLiteral("field \"overlap\" must be true or false"));
    c.overlap = o.value("overlap").toBool();
  }
  return c;
}

StudioConfig StudioConfig::fromJsonText(const QByteArray& text, const QString& origin) {
  QJsonParseError err;
  const QJsonDocument doc = QJsonDocument::fromJson(text, &err);
  if (err.error != QJsonParseError::NoError)
    fail(origin, QStringLiteral("not valid JSON at offset %1: %2").arg(err.offset).arg(err.errorString()));
  if (!doc.isObject()) fail(origin, QStringLiteral("expected a JSON object such as {\"model\": \"convnext-t\"}"));
  return fromJson(doc.object(), origin);
}

ResolvedConfig resolveConfig(const StudioConfig& c) {
  tools::TrainArgs a;
  a.model = c.model.toStdString();
  a.input = c.input.toStdString();
  a.batch = c.batch;
  a.mesh = c.mesh.toStdString();
  a.shard = c.shard.toStdString();
  a.checkpointing = c.checkpointing.toStdString();
  a.optimizer = c.optimizer.toStdString();
  a.task = "classify";  // as `tessera sim run`
  a.classes = 1000;
  a.steps = 1;
  a.no_overlap = !c.overlap;
  TESSERA_CHECK(c.batch >= 1, "batch ", c.batch, " must be at least 1");
  const tools::TrainRunConfig t = tools::make_train_config(a);
  tools::SimSetup setup = tools::make_sim_setup(c.topology.toStdString(), c.calibration.toStdString());
  ResolvedConfig r{t.train, t.mesh, std::move(setup.catalog), std::move(setup.options), std::move(setup.topology)};
  r.train.dtype = trainableDtype(c.dtype, QStringLiteral("dtype"));
  const int have = static_cast<int>(r.topology.devices().size());
  TESSERA_CHECK(r.mesh.size() <= have, "mesh ", r.mesh.to_string(), " needs ", r.mesh.size(),
                " devices but topology '", r.topology.name, "' has ", have,
                "; choose a smaller mesh or a larger topology (e.g. dgx-a100:2)");
  return r;
}

}  // namespace tessera::studio
