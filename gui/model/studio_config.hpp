// The studio's configuration: what the Configuration panel edits, what sessions and --config files
// hold (JSON), and its conversion to core's training options and sim's topology.
#pragma once

#include <QJsonObject>
#include <QString>

#include "tessera/core/mesh.hpp"
#include "tessera/nn/trainer.hpp"
#include "tessera/sim/devices.hpp"
#include "tessera/sim/topology.hpp"

namespace tessera::studio {

/// One simulated training configuration (the `tessera sim run` options the studio exposes).
struct StudioConfig {
  QString model = QStringLiteral("convnext-t");  ///< preset name or path to a JSON model file
  QString input = QStringLiteral("3x512x2048");  ///< C×H×W of one image
  int batch = 1;                                 ///< global batch
  QString mesh = QStringLiteral("sp=4");         ///< "sp=4", "dp=2,sp=2", "sp_h=2,sp_w=2"
  QString shard = QStringLiteral("W");           ///< W or H for a mesh dim named sp
  QString checkpointing = QStringLiteral("none");  ///< none, block, stage
  QString optimizer = QStringLiteral("adamw");     ///< sgd, adamw
  QString topology = QStringLiteral("dgx-a100");   ///< preset or path to a topology JSON file
  QString dtype = QStringLiteral("f32");           ///< f32, bf16, f16
  bool overlap = true;

  bool operator==(const StudioConfig&) const = default;

  QJsonObject toJson() const;
  /// Reads the fields present in `o` over the defaults. Throws InvalidArgument naming an unknown
  /// or ill-typed field and `origin`.
  static StudioConfig fromJson(const QJsonObject& o, const QString& origin = QStringLiteral("config"));
  /// Parses JSON text (an object); throws InvalidArgument with the parser's message and offset.
  static StudioConfig fromJsonText(const QByteArray& text, const QString& origin = QStringLiteral("config"));
};

/// What core and sim need to run a configuration: the same conversion `tessera sim run` makes
/// (tools' make_train_config), so that the studio and the CLI simulate exactly the same thing.
struct ResolvedConfig {
  nn::TrainOptions train;
  core::DeviceMesh mesh;
  sim::Topology topology;
};

/// Validates and converts; throws tessera::Error (InvalidArgument) with a message for the user.
ResolvedConfig resolveConfig(const StudioConfig& c, const sim::DeviceCatalog& catalog);

/// A topology preset name, or a topology JSON file when `spec` names an existing file.
sim::Topology loadTopology(const std::string& spec, const sim::DeviceCatalog& catalog);

}  // namespace tessera::studio
