// bench_train's pipeline figures (runs on a --mesh with a dim named pp): per stage, the measured
// bubble fraction (the time a stage's ranks waited for another stage's activations or gradients,
// StepStats::pipeline_wait_s, over their step time), the calibrated simulator's prediction of the
// same (the time each simulated rank's program waits in its pipeline receives, over the simulated
// iteration), the ideal (pp − 1) / (M + pp − 1), and the activation peak against the schedule's
// bound: the micro-batches it keeps in flight on the stage times one micro-batch's activations.
#pragma once

#include <string>
#include <vector>

#include "tessera/core/mesh.hpp"
#include "tessera/sim/engine.hpp"

namespace tessera::bench {

/// A pipeline run's figures; the per-stage vectors have one entry per stage.
struct PipelineFigures {
  int stages = 1, micro_batches = 1;
  std::string schedule;            ///< "1f1b" or "gpipe"
  std::vector<int> stage_of_rank;  ///< each world rank's coordinate on the mesh dim pp
  /// [timed step][rank]: StepStats::pipeline_wait_s and step_time_s (seconds).
  std::vector<std::vector<double>> wait_s, step_s;
  std::vector<double> act_mib;  ///< per stage: the activation-category peak, max over its ranks
  /// Per stage: one micro-batch's activation peak (a run of batch / M samples with M = 1 on the
  /// same mesh); empty when not measured.
  std::vector<double> micro_act_mib;
  /// Per simulation round, per stage: the simulated bubble fraction and the wait it is made of.
  std::vector<std::vector<double>> sim_bubbles, sim_wait_ms;
};

/// Whether `mesh` has a dim named pp with more than one stage.
bool has_pipeline(const core::DeviceMesh& mesh);

/// Empty figures for a run on `mesh` (it has a pp dim) of `steps` timed steps.
PipelineFigures pipeline_figures(const core::DeviceMesh& mesh, int micro_batches,
                                 const std::string& schedule, int steps);

/// Per stage: the median over the timed steps of the mean over the stage's ranks of
/// wait_s / step_s.
std::vector<double> measured_bubbles(const PipelineFigures& p);

/// Per stage: the median over the timed steps of the mean over the stage's ranks of wait_s, in ms.
std::vector<double> measured_waits_ms(const PipelineFigures& p);

/// Adds one simulation round to p.sim_wait_ms and p.sim_bubbles: per stage, the mean over the
/// stage's ranks of the time the rank's simulated program waited in pipeline receives (the "halo"
/// receive events of layer pipeline.recv_activation or pipeline.recv_gradient in `result.trace`,
/// each counted from the end of the rank's last compute event before the receive completed), and
/// that over the simulated iteration. Needs a trace of every rank.
void add_simulation(PipelineFigures& p, const sim::SimResult& result);

/// Per stage: the micro-batches the schedule keeps in flight (nn::pipeline_in_flight).
std::vector<int> in_flight(const PipelineFigures& p);

/// The mean of `v` (0 when empty).
double mean_of(const std::vector<double>& v);

/// The "pipeline" object of a run's --json: {"stages", "micro_batches", "schedule",
/// "bubble_ideal", "bubble_measured", "bubble_simulated" (and its error against the measured),
/// "per_stage": [{"stage", "bubble_measured", "bubble_simulated", "in_flight",
/// "activation_peak_mib", "micro_batch_activation_mib", "activation_bound_mib"}]}; the pipeline's
/// bubble figures are the means over its stages.
std::string pipeline_json(const PipelineFigures& p);

/// The table's pipeline section (header and one line per stage of each run), `labels[i]` naming
/// runs[i]; nothing when no run has a pipeline.
void print_pipeline_table(const std::vector<const PipelineFigures*>& runs,
                          const std::vector<std::string>& labels);

}  // namespace tessera::bench
