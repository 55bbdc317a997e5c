// bench_train's pipeline figures (train_pipeline.hpp).
#include "train_pipeline.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "bench_util.hpp"
#include "tessera/nn/pipeline.hpp"

namespace tessera::bench {

bool has_pipeline(const core::DeviceMesh& mesh) {
  const int d = mesh.find_dim("pp");
  return d >= 0 && mesh.dim_size(d) > 1;
}

PipelineFigures pipeline_figures(const core::DeviceMesh& mesh, int micro_batches,
                                 const std::string& schedule, int steps) {
  PipelineFigures p;
  const int d = mesh.dim_index("pp");
  p.stages = mesh.dim_size(d);
  p.micro_batches = micro_batches;
  p.schedule = schedule;
  for (int r = 0; r < mesh.size(); ++r) p.stage_of_rank.push_back(mesh.coord(r, d));
  p.wait_s.assign(std::size_t(steps), std::vector<double>(std::size_t(mesh.size())));
  p.step_s = p.wait_s;
  p.act_mib.assign(std::size_t(p.stages), 0.0);
  return p;
}

namespace {

/// Per stage: the mean over the stage's ranks of per_rank.
std::vector<double> stage_means(const std::vector<double>& per_rank,
                                const std::vector<int>& stage_of_rank, int stages) {
  std::vector<double> sum(std::size_t(stages), 0.0), n(std::size_t(stages), 0.0);
  for (std::size_t r = 0; r < per_rank.size() && r < stage_of_rank.size(); ++r) {
    sum[std::size_t(stage_of_rank[r])] += per_rank[r];
    n[std::size_t(stage_of_rank[r])] += 1;
  }
  for (std::size_t s = 0; s < sum.size(); ++s) sum[s] = n[s] > 0 ? sum[s] / n[s] : 0.0;
  return sum;
}

/// A simulated wait for another stage: a pipeline receive, or the step-end sums over the stages
/// (the trainer counts both in StepStats::pipeline_wait_s).
bool is_pipeline_recv(const core::TraceEvent& e) {
  if (e.cat == "comm") return e.layer == "pipeline.sum_over_stages";
  return e.cat == "halo" && e.name == "recv" &&
         (e.layer == "pipeline.recv_activation" || e.layer == "pipeline.recv_gradient");
}

/// Per stage: the median over the rounds (the rows of `rounds`, one figure per stage); empty
/// without rounds.
std::vector<double> round_median(const std::vector<std::vector<double>>& rounds, int stages) {
  std::vector<double> m;
  if (rounds.empty()) return m;
  for (int s = 0; s < stages; ++s) {
    std::vector<double> v;
    for (const std::vector<double>& round : rounds) v.push_back(round[std::size_t(s)]);
    m.push_back(stats_of(v).median);
  }
  return m;
}

/// Per stage: the median over the timed steps of the mean over the stage's ranks of f(step, rank).
template <class F>
std::vector<double> step_median(const PipelineFigures& p, F f) {
  std::vector<std::vector<double>> per_stage(std::size_t(p.stages));  // samples, one per step
  for (std::size_t i = 0; i < p.wait_s.size(); ++i) {
    std::vector<double> v;
    for (std::size_t r = 0; r < p.wait_s[i].size(); ++r) v.push_back(f(i, r));
    const std::vector<double> m = stage_means(v, p.stage_of_rank, p.stages);
    for (std::size_t s = 0; s < m.size(); ++s) per_stage[s].push_back(m[s]);
  }
  std::vector<double> out;
  for (const std::vector<double>& v : per_stage) out.push_back(stats_of(v).median);
  return out;
}

}  // namespace

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / double(v.size());
}

std::vector<double> measured_bubbles(const PipelineFigures& p) {
  return step_median(p, [&](std::size_t i, std::size_t r) {
    return p.step_s[i][r] > 0 ? p.wait_s[i][r] / p.step_s[i][r] : 0.0;
  });
}

std::vector<double> measured_waits_ms(const PipelineFigures& p) {
  return step_median(p, [&](std::size_t i, std::size_t r) { return 1e3 * p.wait_s[i][r]; });
}

void add_simulation(PipelineFigures& p, const sim::SimResult& result) {
  // Per rank, its compute events' ends (one compute stream: in order) and its receives' ends.
  std::map<int, std::vector<double>> compute_ends, recv_ends;
  for (const core::TraceEvent& e : result.trace) {
    if (e.ph != 'X') continue;
    if (e.cat == "compute") compute_ends[e.pid].push_back(e.ts_us + e.dur_us);
    if (is_pipeline_recv(e)) recv_ends[e.pid].push_back(e.ts_us + e.dur_us);
  }
  const double iteration_us = double(result.iteration_ps) * 1e-6;
  std::vector<double> per_rank(p.stage_of_rank.size(), 0.0);  // microseconds waited
  for (auto& [rank, ends] : recv_ends) {
    std::vector<double>& c = compute_ends[rank];
    std::sort(c.begin(), c.end());
    double waited = 0;
    for (double t : ends) {
      // The rank asked for the data once its last compute before the arrival was done (the
      // trainer waits on each receive as it posts it), or at the iteration's start.
      const auto it = std::upper_bound(c.begin(), c.end(), t);
      waited += t - (it == c.begin() ? 0.0 : *(it - 1));
    }
    if (rank >= 0 && std::size_t(rank) < per_rank.size()) per_rank[std::size_t(rank)] = waited;
  }
  std::vector<double> ms, fraction;
  for (double w : stage_means(per_rank, p.stage_of_rank, p.stages)) {
    ms.push_back(w * 1e-3);
    fraction.push_back(iteration_us > 0 ? w / iteration_us : 0.0);
  }
  p.sim_wait_ms.push_back(ms);
  p.sim_bubbles.push_back(fraction);
}

std::vector<int> in_flight(const PipelineFigures& p) {
  const nn::PipelineSchedule s = *nn::parse_pipeline_schedule(p.schedule);
  std::vector<int> v;
  for (int k = 0; k < p.stages; ++k)
    v.push_back(nn::pipeline_in_flight(s, p.stages, k, p.micro_batches));
  return v;
}

namespace {

/// One line of the pipeline table: a stage, or the pipeline ("all"; flight 0: no bound).
struct TableRow {
  std::string stage;
  double bubble = 0, sim_bubble = -1;  // sim < 0: not simulated
  double wait_ms = 0, sim_wait_ms = -1;
  int flight = 0;
  double act_mib = 0, micro_mib = 0;  // micro 0: not measured
};

/// Per stage, then the pipeline: the figures of the table and the JSON.
std::vector<TableRow> table_rows(const PipelineFigures& p) {
  const std::vector<double> bubble = measured_bubbles(p), wait = measured_waits_ms(p);
  const std::vector<double> sim = round_median(p.sim_bubbles, p.stages),
                            sim_wait = round_median(p.sim_wait_ms, p.stages);
  const std::vector<int> flight = in_flight(p);
  std::vector<TableRow> rows;
  for (std::size_t s = 0; s < std::size_t(p.stages); ++s)
    rows.push_back({std::to_string(s), bubble[s], sim.empty() ? -1 : sim[s], wait[s],
                    sim.empty() ? -1 : sim_wait[s], flight[s], p.act_mib[s],
                    p.micro_act_mib.empty() ? 0 : p.micro_act_mib[s]});
  rows.push_back({"all", mean_of(bubble), sim.empty() ? -1 : mean_of(sim), mean_of(wait),
                  sim.empty() ? -1 : mean_of(sim_wait), 0,
                  *std::max_element(p.act_mib.begin(), p.act_mib.end()), 0});
  return rows;
}

void print_row(const std::string& label, const PipelineFigures& p, const TableRow& w) {
  char sim[16] = "-", err[16] = "-", sim_wait[16] = "-", fl[16] = "-", bound[16] = "-",
       ratio[16] = "-";
  if (w.sim_bubble >= 0) {
    std::snprintf(sim, sizeof sim, "%.3f", w.sim_bubble);
    std::snprintf(sim_wait, sizeof sim_wait, "%.1f", w.sim_wait_ms);
    if (w.bubble > 0)
      std::snprintf(err, sizeof err, "%+.1f%%", 100 * (w.sim_bubble / w.bubble - 1));
  }
  if (w.flight > 0) std::snprintf(fl, sizeof fl, "%d", w.flight);
  if (w.flight > 0 && w.micro_mib > 0) {
    std::snprintf(bound, sizeof bound, "%.2f", w.flight * w.micro_mib);
    std::snprintf(ratio, sizeof ratio, "%.2f", w.act_mib / (w.flight * w.micro_mib));
  }
  std::printf("%-22s %3d %5s %5s %6.3f %8.3f %9s %8s %7.1f %7s %6s %8.2f %9s %6s\n", label.c_str(),
              p.micro_batches, p.schedule.c_str(), w.stage.c_str(),
              nn::pipeline_ideal_bubble(p.stages, p.micro_batches), w.bubble, sim, err, w.wait_ms,
              sim_wait, fl, w.act_mib, bound, ratio);
}

}  // namespace

std::string pipeline_json(const PipelineFigures& p) {
  const std::vector<TableRow> rows = table_rows(p);
  std::vector<std::string> stages;
  for (int s = 0; s < p.stages; ++s) {
    const TableRow& w = rows[std::size_t(s)];
    Json j;
    j.num("stage", s).num("bubble_measured", w.bubble).num("wait_ms_measured", w.wait_ms);
    if (w.sim_bubble >= 0)
      j.num("bubble_simulated", w.sim_bubble).num("wait_ms_simulated", w.sim_wait_ms);
    j.num("in_flight", w.flight).num("activation_peak_mib", w.act_mib);
    if (w.micro_mib > 0)
      j.num("micro_batch_activation_mib", w.micro_mib)
          .num("activation_bound_mib", w.flight * w.micro_mib);
    stages.push_back(j.str());
  }
  const TableRow& all = rows.back();
  Json j;
  j.num("stages", p.stages)
      .num("micro_batches", p.micro_batches)
      .str("schedule", p.schedule)
      .num("bubble_ideal", nn::pipeline_ideal_bubble(p.stages, p.micro_batches))
      .num("bubble_measured", all.bubble);
  if (all.sim_bubble >= 0) {
    j.num("bubble_simulated", all.sim_bubble);
    if (all.bubble > 0) j.num("bubble_simulated_error", all.sim_bubble / all.bubble - 1);
  }
  return j.raw("per_stage", json_array(stages)).str();
}

void print_pipeline_table(const std::vector<const PipelineFigures*>& runs,
                          const std::vector<std::string>& labels) {
  if (runs.empty()) return;
  std::printf(
      "pipeline, per stage: bubble = time waited for another stage's activations or gradients\n"
      "over the step time (measured: StepStats::pipeline_wait_s / step_time_s, mean over the\n"
      "stage's ranks, median over the timed steps; simulated: waits in the replayed pipeline\n"
      "receives over the simulated iteration, median over the calibrations); wait ms: the waits\n"
      "themselves; stage 'all': the mean over the stages (ideal: (pp-1)/(M+pp-1)); act: the\n"
      "activation-category peak, max over the stage's ranks; bound: in-flight micro-batches x\n"
      "one micro-batch's activation peak (an M=1 run of batch/M on the same mesh)\n"
      "%-22s %3s %5s %5s %6s %8s %9s %8s %7s %7s %6s %8s %9s %6s\n",
      "run", "M", "sched", "stage", "ideal", "measured", "simulated", "sim err", "wait ms",
      "sim ms", "flight", "act MiB", "bound MiB", "act/bd");
  for (std::size_t i = 0; i < runs.size(); ++i)
    for (const TableRow& w : table_rows(*runs[i])) print_row(labels[i], *runs[i], w);
  std::printf("\n");
}

}  // namespace tessera::bench
