// run::train: one thread per rank on the local backend, or one rank per process (env://
// rendezvous) on a multi-process backend such as ucx; each rank runs rank_loop with its own
// Trainer. This file starts the ranks and writes the trace; the loop, the gathering of figures,
// the metrics and the alarms' actions are in files of their own.
#include "tessera/run/train.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>

#include "fault_comm.hpp"
#include "rank_loop.hpp"
#include "tessera/builtin_backends.hpp"
#include "tessera/comm/env_rendezvous.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/core/tracing.hpp"
#include "tessera/data/scene_labels.hpp"

namespace tessera::run {

namespace {

std::shared_ptr<const data::Dataset> make_images(const TrainSetup& c) {
  if (c.images) return c.images;  // images:DIR, opened by resolve_train
  TESSERA_CHECK(c.data.rfind("images:", 0) != 0, "data '", c.data,
                "': an image folder is opened by run::resolve_train (its layout gives the task "
                "and classes); resolve the run description with it");
  if (c.data == "synthetic") {
    data::SyntheticOptions o;
    o.task = c.train.model.task == nn::Task::Classify ? data::Task::Classify : data::Task::Segment;
    o.channels = static_cast<int>(c.train.input[0]);
    o.height = static_cast<int>(c.train.input[1]);
    o.width = static_cast<int>(c.train.input[2]);
    o.num_classes = c.train.model.num_classes;
    o.seed = c.train.seed;
    return data::make_synthetic(o);
  }
  return data::open_npy_folder(c.data, c.train.model.num_classes);
}

/// The images, grouped into scenes of the model's camera views (each view labelled as its scene).
std::shared_ptr<const data::Dataset> make_dataset(const TrainSetup& c) {
  const int views = c.train.model.views;
  if (views == 1) return make_images(c);
  TESSERA_CHECK(!c.train.loader.shuffle, "model '", c.train.model.name, "' takes scenes of ", views,
                " consecutive images, and shuffling permutes images, not scenes; train it with "
                "--no-shuffle (\"shuffle\": false)");
  return data::scene_labels(make_images(c), views);
}

/// The trace file of a rank other than 0 in a run of one rank per process: `path` with
/// ".rank<r>" before its extension.
std::string rank_trace_path(const std::string& path, int rank) {
  const std::size_t slash = path.find_last_of('/'), dot = path.find_last_of('.');
  const bool has_extension =
      dot != std::string::npos && (slash == std::string::npos || dot > slash);
  const std::size_t at = has_extension ? dot : path.size();
  return path.substr(0, at) + ".rank" + std::to_string(rank) + path.substr(at);
}

/// One thread per rank on the local backend; the figures meet on a shared board.
void run_local(const RankContext& context) {
  const int n = context.setup.mesh.size();
  LocalGatherBoard board(n);
  comm::local::run(n, [&](comm::Backend& world) {
    const Gather gather = [&](const nn::StepStats& st, const Bytes& bytes,
                              const data::DataStats& data, const core::AllocatorPtr&) {
      return board.exchange(world, st, bytes, data);
    };
    rank_loop(context, world, context.setup.device_index, gather);
  });
}

/// The store key of a multi-process run's progress (docs/launching.md, "Elastic jobs").
constexpr const char* kProgressKey = "tessera/progress";
/// Its value after the run's first step, set once: where an elastic round resumed and when its
/// first step ended (the launcher may poll too late to see the first progress value).
constexpr const char* kFirstStepKey = "tessera/first_step";

/// "<steps completed> <unix time, 6 decimals>": the value rank 0 sets at kProgressKey after every
/// step, so that a launcher hosting the store can time the rounds of an elastic job.
std::string progress_value(std::int64_t steps_done) {
  const double now_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  char text[64];
  std::snprintf(text, sizeof text, "%lld %.6f", static_cast<long long>(steps_done), now_s);
  return text;
}

/// `callbacks` with on_step also setting the progress key in `store` (rank 0 only calls it).
TrainCallbacks with_progress(const TrainCallbacks& callbacks, comm::Store* store) {
  TrainCallbacks out = callbacks;
  if (!store) return out;
  out.on_step = [store, inner = callbacks.on_step, first = std::make_shared<bool>(true)](
                    const std::vector<nn::StepStats>& ranks, const std::vector<Alarm>& fired) {
    // StepStats::step is the index of the step just taken: step + 1 steps are done, the number a
    // checkpoint of this moment would hold as its "step".
    const std::string value = progress_value(ranks.front().step + 1);
    if (*first) store->set(kFirstStepKey, value);
    *first = false;
    store->set(kProgressKey, value);
    if (inner) inner(ranks, fired);
  };
  return out;
}

/// One rank per process (ucx, ...): env:// rendezvous, the world backend from the registry,
/// figures gathered with all_gather. A failure aborts the job so the other ranks stop at once
/// (except a NonFiniteError or AlarmStopped, which every rank throws at the same step by itself).
void run_distributed(const RankContext& context) {
  const TrainSetup& cfg = context.setup;
  const comm::EnvInfo info = comm::read_env();
  TESSERA_CHECK(info.size == cfg.mesh.size(), "mesh ", cfg.mesh.to_string(), " has ",
                cfg.mesh.size(), " ranks but this job has ", info.size, " processes (", info.source,
                " variables); start one process per rank, e.g. tessera launch --nproc ",
                cfg.mesh.size(), " -- train ...");
  context.result.rank = info.rank;
  WorldBackend job = make_world_backend(cfg.backend, cfg.timeout, info);
  comm::Backend* world = job.world.get();
  try {
    const Gather gather = [&](const nn::StepStats& st, const Bytes& bytes,
                              const data::DataStats& data, const core::AllocatorPtr& memory) {
      return all_gather_figures(*world, st, bytes, data, memory);
    };
    if (!cfg.trace.empty() && info.rank != 0)
      context.result.trace_path = rank_trace_path(cfg.trace, info.rank);
    // One process per rank: each takes its own GPU (cuda:N is the first of this node's).
    const TrainCallbacks callbacks = with_progress(context.callbacks, job.rendezvous->store());
    const RankContext ranked{cfg,       context.dataset, context.computes, context.recorder,
                             callbacks, context.result};
    rank_loop(ranked, *world, cfg.device_index + info.local_rank, gather);
    world->barrier();
  } catch (const NonFiniteError&) {
    // Every rank decided this from the same replicated loss and norm and stops at the same step
    // by itself; aborting the job could only turn a peer's own message into "aborted".
    throw;
  } catch (const AlarmStopped&) {
    throw;  // likewise: every rank judged the same gathered figures and stops after the same step
  } catch (const std::exception& e) {
    job.rendezvous->store()->abort(detail::cat("rank ", info.rank, " failed: ", e.what()));
    throw;
  }
}

/// Writes this process's trace (setup.trace, if any) atomically.
void write_trace(const TrainSetup& cfg, const core::TraceRecorder& recorder, TrainResult& res) {
  if (cfg.trace.empty()) return;
  if (res.trace_path.empty()) res.trace_path = cfg.trace;
  std::ostringstream os;
  core::write_chrome_trace(os, recorder.events(), recorder.process_names(),
                           {{"model", cfg.train.model.name},
                            {"mesh", cfg.mesh.to_string()},
                            {"input", core::shape_str(cfg.train.input)},
                            {"source", "tessera train"}});
  core::write_file_atomic(res.trace_path, os.str());
}

/// A fault placed where this mesh never communicates would never fire, and a test or bench
/// relying on it would silently measure nothing: refused.
void check_fault_place(const FaultSpec& fault, const core::DeviceMesh& mesh) {
  bool spatial = false, stages = false;
  for (int d = 0; d < mesh.ndim(); ++d) {
    const std::string& name = mesh.dim_name(d);
    spatial = spatial || (name.rfind("sp", 0) == 0 && mesh.dim_size(d) > 1);
    stages = stages || (name == "pp" && mesh.dim_size(d) > 1);
  }
  const bool halo =
      fault.place == FaultSpec::Place::Forward || fault.place == FaultSpec::Place::Halo;
  TESSERA_CHECK(!halo || spatial, kFaultVariable, "='", fault.text, "': mesh ", mesh.to_string(),
                " shards no spatial dimension, so no rank exchanges halos and the fault would "
                "never fire; place it at allreduce, or use a mesh with sp");
  TESSERA_CHECK(fault.place != FaultSpec::Place::Pipeline || stages, kFaultVariable, "='",
                fault.text, "': mesh ", mesh.to_string(),
                " has no pipeline stages (pp), so the fault would never fire; place it at "
                "allreduce, or use a mesh with pp");
  TESSERA_CHECK(fault.place != FaultSpec::Place::AllReduce || mesh.size() > 1, kFaultVariable, "='",
                fault.text,
                "': a one-rank run all-reduces nothing, so the fault would never "
                "fire");
}

}  // namespace

TrainResult train(const TrainSetup& cfg, const TrainCallbacks& callbacks) {
  const int n = cfg.mesh.size();
  // A malformed TESSERA_FAULT is refused before any rank starts (each rank reads it again).
  if (const auto fault = fault_from_env()) {
    TESSERA_CHECK(fault->rank < n, kFaultVariable, "='", fault->text, "' names rank ", fault->rank,
                  " but mesh ", cfg.mesh.to_string(), " has ", n, " rank(s); expected ",
                  kFaultSyntax);
    check_fault_place(*fault, cfg.mesh);
  }
  auto dataset = make_dataset(cfg);
  compute::Registry computes;
  register_builtin_backends(computes);
  core::TraceRecorder recorder;
  TrainResult res;
  const RankContext context{cfg, std::move(dataset), computes, recorder, callbacks, res};
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (cfg.backend == "local")
      run_local(context);
    else
      run_distributed(context);
  } catch (const NonFiniteError&) {
    // A diverged run stopped every rank at the same step: the metrics file already holds the
    // steps that completed; the trace shows them and the failed step up to the check; the
    // checkpoint (--save) is not written, so an existing file stays as it was.
    write_trace(cfg, recorder, res);
    throw;
  } catch (const AlarmStopped&) {
    // An alarm stopped every rank after the same step: its metrics are written, as is the trace.
    write_trace(cfg, recorder, res);
    throw;
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_trace(cfg, recorder, res);
  return res;
}

int process_rank(const TrainSetup& setup) {
  return setup.backend == "local" ? 0 : comm::read_env().rank;
}

TrainResult train(const RunSpec& spec, const TrainCallbacks& callbacks) {
  return train(resolve_train(spec), callbacks);
}

}  // namespace tessera::run
