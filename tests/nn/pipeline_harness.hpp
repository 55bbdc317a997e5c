// Runs the Trainer on a mesh with pipeline stages (a dim named "pp") over in-process ranks and
// collects what the equivalence rule compares (train_equivalence.hpp): every stage's final
// parameters, gathered by name from the ranks of the stage that holds them, in model order, and
// the losses and gradient norms, which every rank must report alike. It also checks the layout:
// each rank's stage is its "pp" coordinate, the stages' units tile the model in order, and every
// parameter lives on exactly one stage.
#pragma once

#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "nn/train_harness.hpp"
#include "support/catch.hpp"
#include "support/test_utils.hpp"

namespace tessera::test {

/// A pipelined run: the run as train() reports it (params and names over all stages, in model
/// order; replicas_agree: the ranks of each stage end with the same parameters and every rank
/// reports the same losses and gradient norms) and what is wrong with its stage layout, if
/// anything.
struct StagedRun {
  TrainRun run;
  std::string layout_problems;     ///< empty when the stages tile the model as documented
  double max_pipeline_wait_s = 0;  ///< over ranks and steps
};

/// What one rank reports after its run.
struct StageReport {
  int stage = 0, stages = 1, pp_coord = 0;
  std::pair<int, int> units{0, 0};
  int unit_count = 0;
  std::vector<std::string> names;
  std::vector<std::vector<double>> values;
  std::vector<double> losses, grad_norms, lrs;
  double max_wait_s = 0;
};

/// Trains `o.steps` steps (from wherever `before` leaves the trainer) on `mesh`, ranks as threads
/// whose communication waits at most `timeout`; `before` and `after` run on every rank as in
/// train(). A rank's exception is rethrown after every rank has stopped.
StagedRun train_staged(const nn::TrainOptions& o, const core::DeviceMesh& mesh,
                       const std::function<void(nn::Trainer&)>& before = {},
                       const std::function<void(nn::Trainer&)>& after = {},
                       std::chrono::milliseconds timeout = std::chrono::seconds(60));

namespace detail_staged {

inline StageReport run_rank(const nn::TrainOptions& o, const core::DeviceMesh& mesh,
                            comm::Backend& world, const std::shared_ptr<const data::Dataset>& ds,
                            const std::function<void(nn::Trainer&)>& before,
                            const std::function<void(nn::Trainer&)>& after) {
  comm::MeshComm mc(mesh, world);
  RankCompute rc = cpu_compute(world.rank());
  nn::Trainer t(o, &mc, *rc.backend, rc.alloc, ds);
  if (before) before(t);
  StageReport r;
  while (t.next_step() < o.steps) {
    const nn::StepStats s = t.step();
    r.losses.push_back(s.loss);
    r.grad_norms.push_back(s.grad_norm);
    r.lrs.push_back(s.lr);
    r.max_wait_s = std::max(r.max_wait_s, s.pipeline_wait_s);
  }
  if (after) after(t);
  const int pp = mesh.find_dim("pp");
  r.pp_coord = pp < 0 ? 0 : mesh.coord(world.rank(), pp);
  r.stage = t.stage();
  r.stages = t.stages();
  r.units = t.stage_units();
  r.unit_count = static_cast<int>(t.units().size());
  for (nn::Parameter* p : t.parameters()) {
    r.names.push_back(p->name);
    r.values.push_back(to_doubles(p->value));
  }
  return r;
}

/// Checks the reports' layout and gathers the stages' parameters into `out`, in stage order.
inline void gather(const std::vector<StageReport>& reports, StagedRun& out) {
  std::ostringstream problems;
  TrainRun& run = out.run;
  const StageReport& first = reports[0];
  run.losses = first.losses;
  run.grad_norms = first.grad_norms;
  run.lrs = first.lrs;
  std::vector<const StageReport*> holder(first.stages, nullptr);  // the first rank of each stage
  std::map<std::string, int> stage_of;
  for (std::size_t q = 0; q < reports.size(); ++q) {
    const StageReport& r = reports[q];
    out.max_pipeline_wait_s = std::max(out.max_pipeline_wait_s, r.max_wait_s);
    if (r.losses != first.losses || r.grad_norms != first.grad_norms) run.replicas_agree = false;
    if (r.stages != first.stages || r.stage != r.pp_coord || r.stage < 0 ||
        r.stage >= first.stages) {
      problems << "rank " << q << ": stage " << r.stage << " of " << r.stages
               << ", its pp coordinate " << r.pp_coord << "\n";
      continue;
    }
    const StageReport*& h = holder[r.stage];
    if (!h)
      h = &r;
    else if (h->names != r.names || h->units != r.units)
      problems << "rank " << q << " disagrees with its stage\n";
    else if (h->values != r.values)
      run.replicas_agree = false;
  }
  int next_unit = 0;
  for (int s = 0; s < first.stages; ++s) {
    const StageReport* h = holder[s];
    if (!h) {
      problems << "no rank runs stage " << s << "\n";
      continue;
    }
    if (h->units.first != next_unit || h->units.second <= h->units.first)
      problems << "stage " << s << " runs units [" << h->units.first << ", " << h->units.second
               << "), expected to start at " << next_unit << "\n";
    next_unit = h->units.second;
    for (std::size_t i = 0; i < h->names.size(); ++i) {
      if (!stage_of.emplace(h->names[i], s).second)
        problems << "parameter " << h->names[i] << " on stages " << stage_of[h->names[i]] << " and "
                 << s << "\n";
      run.names.push_back(h->names[i]);
      run.params.push_back(h->values[i]);
    }
  }
  if (next_unit != first.unit_count)
    problems << "the stages end at unit " << next_unit << " of " << first.unit_count << "\n";
  out.layout_problems = problems.str();
}

}  // namespace detail_staged

inline StagedRun train_staged(const nn::TrainOptions& o, const core::DeviceMesh& mesh,
                              const std::function<void(nn::Trainer&)>& before,
                              const std::function<void(nn::Trainer&)>& after,
                              std::chrono::milliseconds timeout) {
  const int P = mesh.size();
  auto ds = dataset_for(o);
  std::vector<StageReport> reports(P);
  std::mutex mu;
  comm::local::run(
      P,
      [&](comm::Backend& world) {
        StageReport r = detail_staged::run_rank(o, mesh, world, ds, before, after);
        std::lock_guard<std::mutex> lock(mu);
        reports[world.rank()] = std::move(r);
      },
      timeout);
  StagedRun out;
  detail_staged::gather(reports, out);
  return out;
}

/// The kinds of the units (Trainer::units()) of the model of `o`, as a one-rank Trainer lists
/// them (the stage starts a test gives are indices into this).
inline std::vector<std::string> unit_kinds(const nn::TrainOptions& o) {
  RankCompute rc = cpu_compute(0);
  nn::TrainOptions zero = o;
  zero.steps = 0;
  zero.stage_starts.clear();
  nn::Trainer t(zero, nullptr, *rc.backend, rc.alloc, dataset_for(zero));
  std::vector<std::string> kinds;
  for (nn::Module* m : t.units()) kinds.push_back(m->kind());
  return kinds;
}

/// Float64 runs: equal to rtol (tensor-scaled) in every parameter, loss and gradient norm.
inline void require_close_runs(const StagedRun& r, const TrainRun& ref, double rtol) {
  INFO(r.layout_problems);
  REQUIRE(r.layout_problems.empty());
  REQUIRE(r.run.replicas_agree);
  REQUIRE(r.run.names == ref.names);
  for (std::size_t i = 0; i < r.run.params.size(); ++i) {
    INFO("parameter " << ref.names[i]);
    REQUIRE_CLOSE(r.run.params[i], ref.params[i], rtol);
  }
  REQUIRE(r.run.losses.size() == ref.losses.size());
  for (std::size_t i = 0; i < ref.losses.size(); ++i) {
    INFO("step " << i << ": loss " << r.run.losses[i] << " vs one rank " << ref.losses[i]
                 << ", gradient norm " << r.run.grad_norms[i] << " vs " << ref.grad_norms[i]);
    REQUIRE(std::abs(r.run.losses[i] - ref.losses[i]) <= rtol * std::abs(ref.losses[i]));
    REQUIRE(std::abs(r.run.grad_norms[i] - ref.grad_norms[i]) <=
            rtol * std::abs(ref.grad_norms[i]));
  }
}

}  // namespace tessera::test
