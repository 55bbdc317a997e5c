// The Configuration panel: model, input, batch, mesh, shard, checkpointing, optimizer, topology,
// dtype, precision, gradient reduction dtype, overlap, calibration file, micro-batches and the
// pipeline's schedule and stage starts. It offers only values that can run; every edit emits
// configChanged (the main window re-simulates in the background).
#pragma once

#include <QList>
#include <QWidget>

#include "studio_config.hpp"

class QComboBox;
class QLineEdit;
class QSpinBox;
class QCheckBox;
class QLabel;

namespace tessera::studio {

class ConfigPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ConfigPanel(QWidget* parent = nullptr);
  StudioConfig config() const;
  /// Shows `c` without emitting configChanged.
  void setConfig(const StudioConfig& c);
  /// The status line under the form: simulation time and iteration, or the error (red).
  void setStatus(const QString& text, bool error);
  /// The status line's text.
  QString status() const;

 signals:
  void configChanged(const tessera::studio::StudioConfig& c);

 private:
  void emitChanged();
  /// Disables the topology presets with fewer devices than the mesh has ranks (tooltip: why).
  void enableTopologies();
  /// Disables bf16/fp16 (precision, gradient reduction) unless the dtype is f32, and f64 while
  /// either is 16-bit (tooltips: why): mixed precision keeps f32 master weights.
  void enablePrecisions();
  /// Lets the micro-batch count go up to the batch.
  void enableMicroBatches();
  /// Disables the multi-camera presets unless the batch is whole scenes of their views and the
  /// task is classify (tooltip: why).
  void enableModels();
  QComboBox* model_;
  QLineEdit* input_;
  QSpinBox* batch_;
  QLineEdit* mesh_;
  QComboBox* shard_;
  QComboBox* checkpointing_;
  QComboBox* optimizer_;
  QComboBox* topology_;
  QComboBox* dtype_;
  QComboBox* precision_;
  QComboBox* gradReduce_;
  QCheckBox* overlap_;
  QLineEdit* calibration_;
  QComboBox* task_;
  QSpinBox* classes_;
  QComboBox* device_;
  QCheckBox* tf32_;
  QSpinBox* bucketMib_;
  QSpinBox* microBatches_;
  QComboBox* schedule_;
  QLineEdit* stageStarts_;
  QLabel* status_;
  QList<int> topologyDevices_;  ///< devices of each topology item (presetDevices)
  bool quiet_ = false;
};

}  // namespace tessera::studio
