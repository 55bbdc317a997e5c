// The Configuration panel: model, input, batch, mesh, shard, checkpointing, topology, dtype,
// calibration file. Every
// edit emits configChanged (the main window re-simulates in the background).
#pragma once

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
  QComboBox* model_;
  QLineEdit* input_;
  QSpinBox* batch_;
  QLineEdit* mesh_;
  QComboBox* shard_;
  QComboBox* checkpointing_;
  QComboBox* optimizer_;
  QComboBox* topology_;
  QComboBox* dtype_;
  QCheckBox* overlap_;
  QLineEdit* calibration_;
  QLabel* status_;
  bool quiet_ = false;
};

}  // namespace tessera::studio
