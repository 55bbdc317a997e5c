// phase_breakdown and compare_traces: steps split at the optimizer, phases from the kernels' order,
// transfers and collectives as the union of their intervals; the comparison's JSON and table.
// (Moved here from the studio's gui/model so that the CLI and Python reach it too.)
#include "tessera/run/phase_compare.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"
#include "tessera/run/simulate.hpp"

namespace tessera::run {

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

std::string phase_label(int p) {
  static const char* labels[] = {"forward", "backward", "optimizer", "halo exchange", "collectives"};
  return p >= 0 && p < kNumPhases ? labels[p] : "?";
}

std::string layer_group(const std::string& layer) {
  const std::size_t dot = layer.find('.');
  const std::string first = layer.substr(0, dot);
  if (first == "stages" && dot != std::string::npos) return layer.substr(0, layer.find('.', dot + 1));
  return first.empty() ? "(none)" : first;
}

PhaseBreakdown phase_breakdown(const std::vector<core::TraceEvent>& trace) {
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
  b.steps_used = b.steps - first;
  std::vector<std::string> groupOrder;
  std::map<std::string, double> groups;
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
        b.phase_us[p] += e.dur_us;
        const std::string g = layer_group(e.layer);
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
        // A wait belongs to what it waits for: a batch's on its peers' lanes, a collective's on
        // the comm lane.
        const bool is_halo = e->cat == "halo" || (e->cat == "wait" && e->tid >= core::kLaneHaloBase);
        (is_halo ? halo : coll).emplace_back(e->ts_us, e->ts_us + e->dur_us);
        t1 = std::max(t1, e->ts_us + e->dur_us);
      }
      b.phase_us[kHalo] += unionLength(halo);
      b.phase_us[kCollective] += unionLength(coll);
    }
    b.iteration_us += t1 - t0;
  }
  const double perStep = 1.0 / b.steps_used, perRankStep = perStep / b.ranks;
  b.iteration_us *= perStep;
  for (double& v : b.phase_us) v *= perRankStep;
  for (const std::string& g : groupOrder) b.group_us.emplace_back(g, groups[g] * perRankStep);
  return b;
}

double CompareRow::error_pct() const {
  return measured_us > 0 ? (simulated_us - measured_us) / measured_us * 100.0 : std::numeric_limits<double>::quiet_NaN();
}

namespace {

// The numbers of an input text: "3x32x64" and "[3,32,64]" both give {3, 32, 64}.
std::vector<std::string> numbers_of(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s + " ") {
    if (std::isdigit(static_cast<unsigned char>(ch))) cur += ch;
    else if (!cur.empty()) out.push_back(cur), cur.clear();
  }
  return out;
}

}  // namespace

Comparison compare_traces(const core::ChromeTrace& measured, const std::vector<core::TraceEvent>& simulated,
                          const std::string& model, const std::string& mesh, const std::string& input) {
  Comparison c;
  c.measured = phase_breakdown(measured.events);
  c.simulated = phase_breakdown(simulated);
  const std::string m_model = measured.other_value("model"), m_mesh = measured.other_value("mesh"),
                    m_input = measured.other_value("input");
  c.measured_source = measured.other_value("source") + ": " + m_model + " " + m_mesh + " " + m_input;
  while (!c.measured_source.empty() && (c.measured_source.back() == ' ' || c.measured_source.back() == ':'))
    c.measured_source.pop_back();
  std::vector<std::string> diffs;
  if (!m_model.empty() && m_model != model) diffs.push_back("model " + m_model + " vs " + model);
  if (!m_mesh.empty() && m_mesh != mesh) diffs.push_back("mesh " + m_mesh + " vs " + mesh);
  if (!m_input.empty() && numbers_of(m_input) != numbers_of(input)) diffs.push_back("input " + m_input + " vs " + input);
  for (std::size_t i = 0; i < diffs.size(); ++i)
    c.mismatch += (i ? ", " : "measured run differs: ") + diffs[i];
  c.rows.push_back({"iteration", false, c.measured.iteration_us, c.simulated.iteration_us});
  for (int p = 0; p < kNumPhases; ++p) c.rows.push_back({phase_label(p), false, c.measured.phase_us[p], c.simulated.phase_us[p]});
  std::vector<std::string> order;
  std::map<std::string, std::pair<double, double>> g;
  for (const auto& [name, us] : c.measured.group_us) {
    order.push_back(name);
    g[name].first = us;
  }
  for (const auto& [name, us] : c.simulated.group_us) {
    if (!g.count(name)) order.push_back(name);
    g[name].second = us;
  }
  for (const std::string& name : order) c.rows.push_back({name, true, g[name].first, g[name].second});
  return c;
}

namespace {

using Json = nlohmann::ordered_json;

Json breakdown_json(const PhaseBreakdown& b) {
  Json o;
  o["ranks"] = b.ranks;
  o["steps"] = b.steps;
  o["steps_used"] = b.steps_used;
  o["iteration_us"] = b.iteration_us;
  Json phases = Json::object();
  for (int p = 0; p < kNumPhases; ++p) phases[phase_label(p)] = b.phase_us[p];
  o["phase_us"] = phases;
  Json groups = Json::array();
  for (const auto& [name, us] : b.group_us) groups.push_back({{"group", name}, {"us", us}});
  o["group_us"] = groups;
  return o;
}

}  // namespace

std::string Comparison::to_json() const {
  Json o;
  o["measured_source"] = measured_source;
  o["mismatch"] = mismatch;
  o["measured"] = breakdown_json(measured);
  o["simulated"] = breakdown_json(simulated);
  Json rs = Json::array();
  for (const CompareRow& r : rows) {
    const double e = r.error_pct();
    rs.push_back({{"label", r.label}, {"group", r.group}, {"measured_us", r.measured_us},
                  {"simulated_us", r.simulated_us}, {"error_pct", std::isnan(e) ? Json(nullptr) : Json(e)}});
  }
  o["rows"] = rs;
  return o.dump(1);
}

std::string Comparison::table() const {
  std::string out;
  char buf[160];
  if (!measured_source.empty()) out += "measured: " + measured_source + "\n";
  if (!mismatch.empty()) out += mismatch + " (the comparison is not like for like)\n";
  std::snprintf(buf, sizeof buf, "%-24s %14s %14s %9s\n", "", "measured us", "simulated us", "error");
  out += buf;
  for (const CompareRow& r : rows) {
    const double e = r.error_pct();
    char err[32];
    if (std::isnan(e)) std::snprintf(err, sizeof err, "%9s", "-");
    else std::snprintf(err, sizeof err, "%+8.1f%%", e);
    std::snprintf(buf, sizeof buf, "%-24s %14.1f %14.1f %s\n", ((r.group ? "  " : "") + r.label).c_str(),
                  r.measured_us, r.simulated_us, err);
    out += buf;
  }
  return out;
}

Comparison compare_trace_files(const std::string& measured, const std::string& simulated) {
  const core::ChromeTrace m = core::read_chrome_trace_file(measured);
  const core::ChromeTrace s = core::read_chrome_trace_file(simulated);
  return compare_traces(m, s.events, s.other_value("model"), s.other_value("mesh"), s.other_value("input"));
}

Comparison compare_with_simulation(const std::string& measured, const RunSpec& spec) {
  const core::ChromeTrace m = core::read_chrome_trace_file(measured);
  const SimRun run = simulate(resolve_sim(spec), /*every_rank=*/true, /*keep_trace=*/true);
  return compare_traces(m, run.result.trace, run.setup.train.model.name, run.setup.mesh.to_string(), spec.input);
}

}  // namespace tessera::run
