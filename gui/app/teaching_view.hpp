// Teaching mode: step through one sharded 3×3 convolution and its backward, every number being one
// core computed (teaching.hpp). Previous / next / play; the canvas paints the current step.
#pragma once

#include <QWidget>

#include "teaching.hpp"

class QLabel;
class QPushButton;
class QTimer;

namespace tessera::studio {

class TeachingCanvas;

class TeachingView : public QWidget {
  Q_OBJECT
 public:
  explicit TeachingView(QWidget* parent = nullptr);
  int step() const { return step_; }
  int stepCount() const { return static_cast<int>(example_.steps.size()); }
  /// Shows step `i` (clamped to the steps there are).
  void setStep(int i);
  void next();
  void previous();
  /// Starts or stops stepping every `ms` milliseconds (wrapping around at the end).
  void setPlaying(bool on, int ms = 1800);
  bool playing() const;
  const TeachingExample& example() const { return example_; }

 private:
  TeachingExample example_;
  QString error_;
  int step_ = 0;
  QLabel* title_;
  QLabel* text_;
  QPushButton* prev_;
  QPushButton* next_;
  QPushButton* play_;
  QTimer* timer_;
  TeachingCanvas* canvas_;
};

}  // namespace tessera::studio
