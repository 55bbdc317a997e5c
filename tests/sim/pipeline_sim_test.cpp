// Pipeline stages and micro-batches in the simulator: folding keeps each stage's program, 1F1B
// keeps fewer micro-batches' activations than GPipe, and the simulated bubble of nearly equal
// stages is close to the ideal (pp − 1) / (M + pp − 1).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim_test_util.hpp"
#include "support/catch.hpp"
#include "tessera/nn/pipeline.hpp"
#include "tessera/sim/fold.hpp"
#include "tessera/sim/stage_cut.hpp"

using namespace tessera;

namespace {

// A small ConvNeXt with many equal blocks (units), so that balanced stages are nearly equal.
nn::TrainOptions pipeline_run(int micro_batches, nn::PipelineSchedule schedule) {
  nn::TrainOptions o = simtest::small_run("convnext");
  o.model.depths = {2, 2, 6, 2};
  o.input = {3, 64, 128};
  o.batch = 2 * micro_batches;
  o.micro_batches = micro_batches;
  o.schedule = schedule;
  return o;
}

// The engine's result for `o` on `mesh` over a star of fast links (compute dominates), cut by
// the simulator.
sim::SimResult simulate(nn::TrainOptions o, const std::string& mesh_text, bool trace = false) {
  const core::DeviceMesh mesh = core::DeviceMesh::parse(mesh_text);
  const sim::DeviceCatalog cat;
  o.stage_starts = sim::balanced_stage_starts(o, mesh, cat.get("a100-80gb"));
  const sim::Topology topo = simtest::star(mesh.size(), 1e12, 1000);
  sim::EngineOptions eo;
  eo.trace = trace;
  return sim::simulate_iteration(sim::replay_folded(o, mesh), topo, cat, eo);
}

}  // namespace

TEST_CASE("folding replays each pipeline stage as its own class", "[sim][pipeline][fold]") {
  const std::string mesh_text = GENERATE(std::string("pp=2"), std::string("dp=2,pp=2,sp=2"),
                                         std::string("pp=6"), std::string("dp=2,pp=3"));
  const int m = GENERATE(1, 3);
  nn::TrainOptions o = pipeline_run(m, nn::PipelineSchedule::OneFOneB);
  const core::DeviceMesh mesh = core::DeviceMesh::parse(mesh_text);
  const sim::FoldedReplay f = sim::replay_folded(o, mesh);
  const int pp = mesh.dim_size(mesh.dim_index("pp"));
  REQUIRE(static_cast<int>(f.classes.size()) >= pp);
  for (int r = 0; r < mesh.size(); ++r) {
    INFO(mesh_text << " M=" << m << " rank " << r);
    REQUIRE(sim::replay_difference(f.replay_for(r), sim::replay_rank(o, mesh, r)) == "");
  }
}

TEST_CASE("1F1B keeps fewer micro-batches' activations than GPipe at about the same time",
          "[sim][pipeline]") {
  const int m = 4;
  const sim::SimResult one = simulate(pipeline_run(m, nn::PipelineSchedule::OneFOneB), "pp=2");
  const sim::SimResult gpipe = simulate(pipeline_run(m, nn::PipelineSchedule::GPipe), "pp=2");
  const auto activ = [](const sim::DeviceResult& d) {
    return d.memory.peak_of(core::MemCategory::Activation);
  };
  std::printf("pipeline pp=2 M=%d: 1f1b %.3f ms, stage 0 activations %zu B; gpipe %.3f ms, %zu B\n",
              m, one.iteration_ps / 1e9, activ(one.devices[0]), gpipe.iteration_ps / 1e9,
              activ(gpipe.devices[0]));
  CHECK(activ(one.devices[0]) < activ(gpipe.devices[0]));
  CHECK(activ(one.devices[1]) <= activ(gpipe.devices[1]));
  CHECK(one.iteration_ps <= gpipe.iteration_ps * 1.05);
}

TEST_CASE("the simulated bubble of nearly equal stages is close to the ideal", "[sim][pipeline]") {
  const int pp = GENERATE(2, 4);
  const int m = GENERATE(1, 2, 4, 8);
  const sim::SimResult r = simulate(pipeline_run(m, nn::PipelineSchedule::OneFOneB),
                                    "pp=" + std::to_string(pp), /*trace=*/true);
  // The pipeline's span: from the start to the last kernel of a forward or backward (the
  // optimizer's step after it is no part of the bubble's formula); each stage's busy time in it.
  std::vector<double> busy_us(pp, 0.0);
  double span_us = 0;
  for (const core::TraceEvent& e : r.trace) {
    if (e.ph != 'X' || e.cat != "compute" || e.layer == "optimizer" || e.layer == "grad_bucket")
      continue;
    busy_us.at(static_cast<std::size_t>(e.pid)) += e.dur_us;
    span_us = std::max(span_us, e.ts_us + e.dur_us);
  }
  double idle = 0, slowest_us = 0;
  for (double b : busy_us) {
    idle += (1.0 - b / span_us) / pp;
    slowest_us = std::max(slowest_us, b);
  }
  // The ideal bubble assumes equal stages; the balanced cut of whole units leaves the slowest
  // stage a little above the mean, which adds idle time, at most as if that stage paced every
  // step of the pipeline (M + pp − 1 of its micro-batch times).
  const double ideal = nn::pipeline_ideal_bubble(pp, m);
  double mean_us = 0;
  for (double b : busy_us) mean_us += b / pp;
  const double paced = 1.0 - mean_us / (slowest_us / m * (m + pp - 1));
  std::printf(
      "pipeline pp=%d M=%d: iteration %.3f ms, forward-backward span %.3f ms, mean idle "
      "%.3f, ideal bubble %.3f, paced by the slowest stage %.3f (imbalance %.3f)\n",
      pp, m, r.iteration_ps / 1e9, span_us / 1e3, idle, ideal, paced, slowest_us / mean_us);
  CHECK(idle > ideal - 0.01);
  CHECK(idle < paced + 0.01);
  if (slowest_us / mean_us < 1.02) CHECK(std::abs(idle - ideal) < 0.01);  // nearly equal stages
}
