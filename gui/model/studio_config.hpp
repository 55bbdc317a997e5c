// The studio's configuration: what the Configuration panel edits, what sessions and --config files
// hold (JSON, the run description's simulation fields), and its conversion — through the run
// layer's RunSpec and resolve_sim, as `tessera sim run` — to core's and sim's options.
#pragma once

#include <QJsonObject>
#include <QString>
#include <QStringList>

#include "tessera/run/resolve.hpp"
#include "tessera/run/spec.hpp"

namespace tessera::studio {

/// One simulated training configuration: the fields of run::RunSpec::simulation_fields() (the
/// `tessera sim run` options), in Qt's types. Training-only fields (lr, steps, data, ...) change no
/// simulated figure and are not here.
struct StudioConfig {
  QString model = QStringLiteral("convnext-t");  ///< preset name or path to a JSON model file
  QString input = QStringLiteral("3x512x2048");  ///< C×H×W of one image
  int batch = 1;                                 ///< global batch
  QString mesh = QStringLiteral("sp=4");         ///< "sp=4", "dp=2,sp=2", "sp_h=2,sp_w=2"
  QString shard = QStringLiteral("W");           ///< W or H for a mesh dim named sp
  QString checkpointing = QStringLiteral("none");  ///< none, block, stage
  QString optimizer = QStringLiteral("adamw");     ///< sgd, adamw
  QString topology = QStringLiteral("dgx-a100");   ///< preset or path to a topology JSON file
  QString dtype = QStringLiteral("f32");           ///< one of trainableDtypes(): the master weights'
  /// fp32, or bf16 / fp16 (mixed precision: 16-bit activations, saved tensors and halos, f32 master
  /// weights; needs dtype f32): one of precisionNames().
  QString precision = QStringLiteral("fp32");
  /// What gradient buckets are all-reduced in (JSON field "grad_reduce_dtype"): fp32, bf16, fp16.
  QString gradReduce = QStringLiteral("fp32");
  bool overlap = true;
  QString task = QStringLiteral("classify");  ///< classify or segment (the head and loss)
  int classes = 1000;
  QString device;      ///< device model of every rank; empty: the topology's
  bool tf32 = false;   ///< time convolutions at the TF32 tensor-core peak
  int bucketMib = 4;   ///< gradient all-reduce bucket size (JSON field "bucket_mib")
  int microBatches = 1;  ///< micro-batches per step (JSON field "micro_batches"); divides batch
  /// With a mesh dim named pp: 1f1b or gpipe (JSON field "schedule").
  QString schedule = QStringLiteral("1f1b");
  /// With pp: where each stage after the first begins, "4,9" (JSON field "stage_starts"; empty:
  /// balanced).
  QString stageStarts;
  /// A `tessera calibrate` file applied as `tessera sim run --calibration` does (the measured
  /// cpu-host device, its shared-memory links and kernel rates); empty: the built-in figures.
  QString calibration;

  bool operator==(const StudioConfig&) const = default;

  QJsonObject toJson() const;
  /// The run description (RunSpec::for_simulation() with these fields).
  run::RunSpec toSpec() const;
  /// The simulation fields of `spec` (the others are left out).
  static StudioConfig fromSpec(const run::RunSpec& spec);
  /// Reads the fields present in `o` over the defaults, parsed and checked by RunSpec::from_json.
  /// Throws InvalidArgument naming an unknown or ill-typed field and `origin`.
  static StudioConfig fromJson(const QJsonObject& o, const QString& origin = QStringLiteral("config"));
  /// Parses JSON text (an object); throws InvalidArgument with the parser's message and offset.
  static StudioConfig fromJsonText(const QByteArray& text, const QString& origin = QStringLiteral("config"));
};

/// The dtypes the studio offers: the names of core's nn::training_dtypes() (what Trainer::step
/// trains in), reference first. bf16/f16 appear here once core trains in them.
QStringList trainableDtypes();

/// The precisions a run computes in (nn::precision_name of every nn::Precision): fp32, bf16, fp16.
QStringList precisionNames();

/// Why `precision` (a precisionNames() entry, for the precision or the gradient reduction) cannot
/// go with `dtype`, or an empty string when it can: mixed precision keeps f32 master weights.
QString precisionConflict(const QString& precision, const QString& dtype);

/// Devices a topology preset has (sim::Topology::preset); 0 for a name that is not a preset (a
/// topology JSON file, or a typo: resolveConfig reports those).
int presetDevices(const QString& topology);

/// Ranks a mesh such as "dp=2,sp=2" has (core::DeviceMesh::parse); 0 when it does not parse.
int meshRanks(const QString& mesh);

/// What core and sim need to run a configuration: run::resolve_sim, the same conversion
/// `tessera sim run` makes, so that the studio and the CLI simulate exactly the same thing.
using ResolvedConfig = run::SimSetup;

/// Validates and converts; throws tessera::Error (InvalidArgument) with a message for the user
/// (for a bad calibration file, the loader's, naming the file and the field).
ResolvedConfig resolveConfig(const StudioConfig& c);

}  // namespace tessera::studio
