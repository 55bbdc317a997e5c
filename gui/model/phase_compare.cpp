// phaseBreakdown and compareTraces: steps split at the optimizer, phases from the kernels' order,
// transfers and collectives as the union of their intervals.
#include "phase_compare.hpp"

#include <QRegularExpression>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "tessera/core/error.hpp"

namespace tessera::studio {

namespace {

bool isOptimizer(const core::TraceEvent& e) { return e.layer == "optimizer"; }

// Length of the union of [a, b) intervals.
double unionLength(std::vector<std::pair<double, double>> iv) {
  std::sort(iv.begin(), iv.end());
  double total = 0, coveredTo = -std::numeric_limits<double>::infinity();
  for (auto [a, b] : iv) {
    a = std::max(a, coveredTo);
    if (b > a) total += b - a;
    coveredTo = std::max(coveredTo, b);
  }
  return total;
}

struct RankSteps {
  std::vector<std::vector<const core::TraceEvent*>> compute;  // per step, in time order
  std::vector<double> begin;                                  // per step: its first kernel's start
};

}  // namespace

QString phaseLabel(int p) {
  static const char* labels[] = {"forward", "backward", "optimizer", "halo exchange", "collectives"};
  return p >= 0 && p < kNumPhases ? QString::fromLatin1(labels[p]) : QStringLiteral("?");
}

QString layerGroup(const std::string& layer) {
  const QString l = QString::fromStdString(layer);
  const QStringList parts = l.split(QLatin1Char('.'));
  if (parts.size() >= 2 && parts[0] == QLatin1String("stages")) return parts[0] + QLatin1Char('.') + parts[1];
  return parts.value(0).isEmpty() ? QStringLiteral("(none)") : parts[0];
}

PhaseBreakdown phaseBreakdown(const std::vector<core::TraceEvent>& trace) {
  std::map<int, std::vector<const core::TraceEvent*>> kernels, comm;  // per rank
  for (const core::TraceEvent& e : trace) {
    if (e.ph != 'X') continue;
    (e.cat == "compute" ? kernels : comm)[e.pid].push_back(&e);
  }
  TESSERA_CHECK(!kernels.empty(), "compare: the trace has no compute events; expected a trace of tessera train "
                "--trace or tessera sim run --trace");
  // Steps: a rank's kernels in time order; a step ends where a kernel follows optimizer ops.
  std::map<int, RankSteps> ranks;
  for (auto& [pid, all] : kernels) {
    std::stable_sort(all.begin(), all.end(), [](auto* a, auto* b) { return a->ts_us < b->ts_us; });
    RankSteps& rs = ranks[pid];
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (i == 0 || (isOptimizer(*all[i - 1]) && !isOptimizer(*all[i]))) {
        rs.compute.emplace_back();
        rs.begin.push_back(all[i]->ts_us);
      }
      rs.compute.back().push_back(all[i]);
    }
  }
  PhaseBreakdown b;
  b.ranks = static_cast<int>(ranks.size());
  b.steps = static_cast<int>(ranks.begin()->second.compute.size());
  for (const auto& [pid, rs] : ranks)
    TESSERA_CHECK(static_cast<int>(rs.compute.size()) == b.steps, "compare: rank ", pid, " ran ", rs.compute.size(),
                  " steps but rank ", ranks.begin()->first, " ran ", b.steps, "; the trace is incomplete");
  const int first = b.steps > 1 ? 1 : 0;
  b.stepsUsed = b.steps - first;
  std::vector<QString> groupOrder;
  std::map<QString, double> groups;
  for (int s = first; s < b.steps; ++s) {
    double t0 = std::numeric_limits<double>::infinity(), t1 = 0;
    for (const auto& [pid, rs] : ranks) {
      const auto& k = rs.compute[s];
      int loss = -1;
      for (std::size_t i = 0; i < k.size(); ++i)
        if (k[i]->layer == "loss") loss = static_cast<int>(i);
      for (std::size_t i = 0; i < k.size(); ++i) {
        const core::TraceEvent& e = *k[i];
        const bool backward = loss >= 0 ? static_cast<int>(i) > loss : e.name.find("backward") != std::string::npos;
        const Phase p = isOptimizer(e) ? kOptimizer : backward ? kBackward : kForward;
        b.phaseUs[p] += e.dur_us;
        const QString g = layerGroup(e.layer);
        if (!groups.count(g)) groupOrder.push_back(g);
        groups[g] += e.dur_us;
        t0 = std::min(t0, e.ts_us);
        t1 = std::max(t1, e.ts_us + e.dur_us);
      }
      // Transfers and collectives that start within this step (before the rank's next step).
      const double from = rs.begin[s];
      const double to = s + 1 < b.steps ? rs.begin[s + 1] : std::numeric_limits<double>::infinity();
      std::vector<std::pair<double, double>> halo, coll;
      for (const core::TraceEvent* e : comm[pid]) {
        if (e->ts_us < from || e->ts_us >= to) continue;
        (e->cat == "halo" ? halo : coll).emplace_back(e->ts_us, e->ts_us + e->dur_us);
        t1 = std::max(t1, e->ts_us + e->dur_us);
      }
      b.phaseUs[kHalo] += unionLength(halo);
      b.phaseUs[kCollective] += unionLength(coll);
    }
    b.iterationUs += t1 - t0;
  }
  const double perStep = 1.0 / b.stepsUsed, perRankStep = perStep / b.ranks;
  b.iterationUs *= perStep;
  for (double& v : b.phaseUs) v *= perRankStep;
  for (const QString& g : groupOrder) b.groupUs.emplace_back(g, groups[g] * perRankStep);
  return b;
}

double CompareRow::errorPct() const {
  return measuredUs > 0 ? (simulatedUs - measuredUs) / measuredUs * 100.0 : std::numeric_limits<double>::quiet_NaN();
}

namespace {

// The numbers of an input text: "3x32x64" and "[3,32,64]" both give {3, 32, 64}.
QStringList numbersOf(const QString& s) {
  QStringList out;
  auto it = QRegularExpression(QStringLiteral("\\d+")).globalMatch(s);
  while (it.hasNext()) out << it.next().captured(0);
  return out;
}

}  // namespace

Comparison compareTraces(const core::ChromeTrace& measured, const std::vector<core::TraceEvent>& simulated,
                         const QString& model, const QString& mesh, const QString& input) {
  Comparison c;
  c.measured = phaseBreakdown(measured.events);
  c.simulated = phaseBreakdown(simulated);
  const QString mModel = QString::fromStdString(measured.other_value("model"));
  const QString mMesh = QString::fromStdString(measured.other_value("mesh"));
  const QString mInput = QString::fromStdString(measured.other_value("input"));
  c.measuredSource = QStringLiteral("%1: %2 %3 %4")
                         .arg(QString::fromStdString(measured.other_value("source")), mModel, mMesh, mInput)
                         .trimmed();
  QStringList diffs;
  if (!mModel.isEmpty() && mModel != model) diffs << QStringLiteral("model %1 vs %2").arg(mModel, model);
  if (!mMesh.isEmpty() && mMesh != mesh) diffs << QStringLiteral("mesh %1 vs %2").arg(mMesh, mesh);
  if (!mInput.isEmpty() && numbersOf(mInput) != numbersOf(input))
    diffs << QStringLiteral("input %1 vs %2").arg(mInput, input);
  if (!diffs.isEmpty()) c.mismatch = QStringLiteral("measured run differs: ") + diffs.join(QStringLiteral(", "));
  c.rows.push_back({QStringLiteral("iteration"), false, c.measured.iterationUs, c.simulated.iterationUs});
  for (int p = 0; p < kNumPhases; ++p)
    c.rows.push_back({phaseLabel(p), false, c.measured.phaseUs[p], c.simulated.phaseUs[p]});
  std::vector<QString> order;
  std::map<QString, std::pair<double, double>> g;
  for (const auto& [name, us] : c.measured.groupUs) {
    order.push_back(name);
    g[name].first = us;
  }
  for (const auto& [name, us] : c.simulated.groupUs) {
    if (!g.count(name)) order.push_back(name);
    g[name].second = us;
  }
  for (const QString& name : order) c.rows.push_back({name, true, g[name].first, g[name].second});
  return c;
}

}  // namespace tessera::studio
