// TeachingView: buttons and text above a canvas that draws the ranks' grids for the current step —
// halos outlined in the receiver's colour, received columns tinted by their sender, cropped
// columns struck out, gradients going back to their owners.
#include "teaching_view.hpp"

#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QTimer>
#include <QVBoxLayout>

#include "views_common.hpp"

namespace tessera::studio {

class TeachingCanvas : public QWidget {
 public:
  TeachingCanvas(const TeachingExample& ex, const QString& error, const int& step)
      : ex_(ex), error_(error), step_(step) {
    setMinimumHeight(300);
  }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  const TeachingExample& ex_;
  const QString& error_;
  const int& step_;
};

namespace {

QColor tint(int rank, int alpha = 70) {
  QColor c = rankColor(rank);
  c.setAlpha(alpha);
  return c;
}

// Which rank owns a global column (from the ranks' input boxes).
int ownerOf(const TeachingExample& ex, std::int64_t col) {
  for (const TeachRank& r : ex.ranks)
    if (col >= r.input.box.r[3].begin && col < r.input.box.r[3].end) return r.rank;
  return -1;
}

struct Cells {
  QPainter& p;
  double left, cell;
  QRectF rect(double top, std::int64_t row, std::int64_t col) const {
    return QRectF(left + col * cell, top + row * cell, cell, cell);
  }
  // Draws a grid at band `top`; `fill` gives each cell's background (invalid: none).
  template <class Fill>
  void draw(const Grid& g, double top, Fill fill, bool struck = false) const {
    for (std::int64_t i = g.box.r[2].begin; i < g.box.r[2].end; ++i)
      for (std::int64_t j = g.box.r[3].begin; j < g.box.r[3].end; ++j) {
        const QRectF r = rect(top, i, j);
        const QColor c = fill(i, j);
        p.fillRect(r, c.isValid() ? c : QColor(Qt::white));
        p.setPen(QColor(170, 170, 170));
        p.drawRect(r);
        p.setPen(struck ? QColor(150, 150, 150) : QColor(Qt::black));
        p.drawText(r, Qt::AlignCenter, QString::number(g.at(i, j), 'g', 4));
      }
  }
  void outline(const nn::Box& b, double top, const QColor& c) const {
    const QRectF r = rect(top, b.r[2].begin, b.r[3].begin)
                         .united(rect(top, b.r[2].end - 1, b.r[3].end - 1));
    p.setPen(QPen(c, 3));
    p.setBrush(Qt::NoBrush);
    p.drawRect(r.adjusted(1, 1, -1, -1));
  }
};

}  // namespace

void TeachingCanvas::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  if (!error_.isEmpty()) {
    p.setPen(QColor(180, 30, 30));
    p.drawText(rect().adjusted(20, 20, -20, -20), Qt::AlignCenter | Qt::TextWordWrap, error_);
    return;
  }
  const TeachStep& st = ex_.steps[static_cast<std::size_t>(step_)];
  const bool global = st.kind == TeachStep::Shards || st.kind == TeachStep::Crop;
  const int bands = ex_.numRanks + (global ? 1 : 0);
  const double labelW = 110, gap = 14;
  const double cell = std::max(12.0, std::min((width() - labelW - 20) / static_cast<double>(ex_.width + 2),
                                              (height() - 10 - gap * bands) / static_cast<double>(bands * ex_.height)));
  QFont f = p.font();
  f.setPixelSize(std::max(8, static_cast<int>(cell * 0.36)));
  p.setFont(f);
  const Cells cells{p, labelW + cell, cell};
  auto bandTop = [&](int b) { return 10 + b * (ex_.height * cell + gap); };
  auto label = [&](int b, const QString& s, const QColor& c) {
    p.setPen(c);
    p.drawText(QRectF(4, bandTop(b), labelW, ex_.height * cell), Qt::AlignVCenter | Qt::AlignLeft | Qt::TextWordWrap, s);
  };
  if (global) {
    label(0, st.kind == TeachStep::Shards ? QStringLiteral("global input\n(1×1×%1×%2)").arg(ex_.height).arg(ex_.width)
                                          : QStringLiteral("assembled\noutput"),
          Qt::black);
    for (const TeachRank& r : ex_.ranks) {
      const Grid& g = st.kind == TeachStep::Shards ? r.input : r.output;
      cells.draw(g, bandTop(0), [&](std::int64_t, std::int64_t j) { return tint(ownerOf(ex_, j), 45); });
    }
  }
  for (const TeachRank& r : ex_.ranks) {
    const int b = r.rank + (global ? 1 : 0);
    const double top = bandTop(b);
    label(b, QStringLiteral("rank %1").arg(r.rank), rankColor(r.rank));
    const auto own = [&](std::int64_t i, std::int64_t j) { return r.input.contains(i, j) ? tint(r.rank, 35) : QColor(); };
    const auto bySender = [&](std::int64_t i, std::int64_t j) {
      return r.input.contains(i, j) ? tint(r.rank, 35) : tint(ownerOf(ex_, j), 110);
    };
    switch (st.kind) {
      case TeachStep::Shards: cells.draw(r.input, top, own); break;
      case TeachStep::SendHalos:
        cells.draw(r.input, top, own);
        for (const TeachMessage& m : ex_.halos)
          if (m.from == r.rank) cells.outline(m.grid.box, top, rankColor(m.to));
        break;
      case TeachStep::Receive: cells.draw(r.buffer, top, bySender); break;
      case TeachStep::Convolve:
        cells.draw(r.convolved, top, [&](std::int64_t ii, std::int64_t j) {
          return r.output.contains(ii, j) ? tint(r.rank, 35) : QColor(225, 225, 225);
        });
        break;
      case TeachStep::Crop: cells.draw(r.output, top, own); break;
      case TeachStep::OutputGrad: cells.draw(r.dy, top, own); break;
      case TeachStep::BufferGrad: cells.draw(r.dbuffer, top, bySender); break;
      case TeachStep::SendGrads:
        cells.draw(r.dbuffer, top, bySender);
        for (const TeachMessage& m : ex_.gradients)
          if (m.from == r.rank) cells.outline(m.grid.box, top, rankColor(m.to));
        break;
      case TeachStep::AddGrads:
        cells.draw(r.dx, top, [&](std::int64_t i, std::int64_t j) {
          for (const TeachMessage& m : ex_.gradients)
            if (m.to == r.rank && m.grid.contains(i, j)) return tint(m.from, 110);
          return tint(r.rank, 35);
        });
        break;
    }
    if (st.kind == TeachStep::Convolve)  // strike out the columns the crop drops
      for (std::int64_t j = r.convolved.box.r[3].begin; j < r.convolved.box.r[3].end; ++j)
        if (!r.output.contains(r.output.box.r[2].begin, j)) {
          p.setPen(QPen(QColor(200, 30, 30), 2));
          const QRectF a = cells.rect(top, 0, j), z = cells.rect(top, ex_.height - 1, j);
          p.drawLine(a.topLeft(), z.bottomRight());
        }
  }
}

TeachingView::TeachingView(QWidget* parent) : QWidget(parent) {
  try {
    example_ = buildTeachingExample();
  } catch (const std::exception& e) {
    error_ = QStringLiteral("Teaching example failed: ") + QString::fromStdString(e.what());
    example_.steps.push_back({TeachStep::Shards, false, QStringLiteral("error"), error_});
  }
  title_ = new QLabel;
  QFont tf = title_->font();
  tf.setBold(true);
  tf.setPointSizeF(tf.pointSizeF() * 1.3);
  title_->setFont(tf);
  text_ = new QLabel;
  text_->setWordWrap(true);
  prev_ = new QPushButton(QStringLiteral("◀ Previous"));
  next_ = new QPushButton(QStringLiteral("Next ▶"));
  play_ = new QPushButton(QStringLiteral("Play"));
  play_->setCheckable(true);
  timer_ = new QTimer(this);
  canvas_ = new TeachingCanvas(example_, error_, step_);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(prev_);
  buttons->addWidget(next_);
  buttons->addWidget(play_);
  buttons->addSpacing(20);
  buttons->addWidget(title_, 1);
  auto* info = new QLabel(QStringLiteral("%1 over a 1×1×%2×%3 input, W split over %4 ranks (local backend, cpu "
                                         "kernels). Kernel rows: [1 0 −1], [2 0 −2], [1 0 −1].")
                              .arg(example_.conv)
                              .arg(example_.height)
                              .arg(example_.width)
                              .arg(example_.numRanks));
  info->setWordWrap(true);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(buttons);
  layout->addWidget(info);
  layout->addWidget(text_);
  layout->addWidget(canvas_, 1);
  connect(prev_, &QPushButton::clicked, this, [this] { previous(); });
  connect(next_, &QPushButton::clicked, this, [this] { next(); });
  connect(play_, &QPushButton::toggled, this, [this](bool on) { setPlaying(on); });
  connect(timer_, &QTimer::timeout, this, [this] { setStep((step_ + 1) % stepCount()); });
  setStep(0);
}

void TeachingView::setStep(int i) {
  step_ = std::max(0, std::min(i, stepCount() - 1));
  const TeachStep& s = example_.steps[static_cast<std::size_t>(step_)];
  title_->setText(QStringLiteral("%1 %2  (%3 of %4)")
                      .arg(s.backward ? QStringLiteral("Backward:") : QStringLiteral("Forward:"), s.title)
                      .arg(step_ + 1)
                      .arg(stepCount()));
  text_->setText(s.text);
  prev_->setEnabled(step_ > 0);
  next_->setEnabled(step_ + 1 < stepCount());
  canvas_->update();
}

void TeachingView::next() { setStep(step_ + 1); }
void TeachingView::previous() { setStep(step_ - 1); }

void TeachingView::setPlaying(bool on, int ms) {
  if (on) timer_->start(ms);
  else timer_->stop();
  if (play_->isChecked() != on) play_->setChecked(on);
  play_->setText(on ? QStringLiteral("Pause") : QStringLiteral("Play"));
}

bool TeachingView::playing() const { return timer_->isActive(); }

}  // namespace tessera::studio
