// One rank's training loop and the layers under its Trainer.
#include "rank_loop.hpp"

#include <sstream>

#include "alarm_actions.hpp"
#include "counting_comm.hpp"
#include "fault_comm.hpp"
#include "resolve_images.hpp"
#include "run_metrics.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/core/tracing.hpp"
#include "tessera/run/checkpoints.hpp"

namespace tessera::run {

namespace {

/// One rank's layers under its Trainer, innermost first: the compute backend and allocator, the
/// trace recorders (--trace; they share the layer scope the modules set), the fault injector
/// (TESSERA_FAULT), the counter of halo and collective bytes (live metrics), the mesh
/// communicator. Members are destroyed outermost first.
class RankStack {
 public:
  RankStack(const RankContext& context, comm::Backend& world, int device_index);
  RankStack(const RankStack&) = delete;
  RankStack& operator=(const RankStack&) = delete;

  comm::MeshComm& mesh_comm() { return *mesh_comm_; }
  compute::Backend& compute() { return *compute_; }
  const core::AllocatorPtr& allocator() const { return alloc_; }
  nn::Scope& scope() { return scope_; }
  FaultState* fault() { return fault_.get(); }
  /// This rank's {halo, collective} bytes since the run began.
  Bytes bytes() const { return {counts_->halo_bytes.load(), counts_->collective_bytes.load()}; }

 private:
  void trace(const RankContext& context, comm::Backend& world);
  void inject_faults(int rank);

  std::unique_ptr<compute::Backend> cpu_;
  core::AllocatorPtr alloc_;
  nn::Scope scope_;
  std::unique_ptr<core::TracingComm> traced_world_;
  std::unique_ptr<core::TracingCompute> traced_cpu_;
  std::shared_ptr<FaultState> fault_;
  std::unique_ptr<FaultComm> faulty_;
  std::shared_ptr<CommCounts> counts_ = std::make_shared<CommCounts>();
  std::unique_ptr<CountingComm> counted_;
  std::unique_ptr<comm::MeshComm> mesh_comm_;
  comm::Backend* world_ = nullptr;       ///< the outermost communicator so far
  compute::Backend* compute_ = nullptr;  ///< the outermost compute backend
};

RankStack::RankStack(const RankContext& context, comm::Backend& world, int device_index) {
  const TrainSetup& cfg = context.setup;
  const int rank = world.rank();
  compute::BackendOptions co;
  co.num_threads = cfg.threads;
  co.device = device_index;
  co.tf32 = cfg.tf32;
  cpu_ = context.computes.create(cfg.compute, co);
  // A device backend's ranks keep every tensor in its memory; the allocator books it there.
  const auto memory = cpu_->device_memory();
  const std::string name = "rank " + std::to_string(rank);
  alloc_ = memory ? std::make_shared<core::Allocator>(name, memory)
                  : std::make_shared<core::Allocator>(name);
  world_ = &world;
  compute_ = cpu_.get();
  if (!cfg.trace.empty()) trace(context, world);
  inject_faults(rank);
  counted_ = std::make_unique<CountingComm>(*world_, counts_);
  mesh_comm_ = std::make_unique<comm::MeshComm>(cfg.mesh, *counted_, cfg.mesh_comm);
}

void RankStack::trace(const RankContext& context, comm::Backend& world) {
  const int rank = world.rank();
  const auto coords = context.setup.mesh.coords_of(rank);
  const core::TraceTarget target{&context.recorder, rank, coords, &scope_, alloc_};
  traced_world_ = std::make_unique<core::TracingComm>(world, target);
  traced_cpu_ = std::make_unique<core::TracingCompute>(*cpu_, target);
  world_ = traced_world_.get();
  compute_ = traced_cpu_.get();
  std::ostringstream name;
  name << "rank " << rank << " (";
  for (std::size_t i = 0; i < coords.size(); ++i) name << (i ? "," : "") << coords[i];
  name << ")";
  context.recorder.set_process_name(rank, name.str());
}

void RankStack::inject_faults(int rank) {
  // TESSERA_FAULT (testing fault handling): the trainer's calls pass through the injector.
  const auto spec = fault_from_env();
  if (!spec) return;
  fault_ = std::make_shared<FaultState>();
  fault_->spec = *spec;
  fault_->world_rank = rank;
  fault_->scope = &scope_;
  faulty_ = std::make_unique<FaultComm>(*world_, fault_);
  world_ = faulty_.get();
}

/// The loop over steps of one rank, with what it keeps from step to step.
class RankLoop {
 public:
  RankLoop(const RankContext& context, comm::Backend& world, int device_index,
           const Gather& gather);
  void run();

 private:
  Gathered train_step();
  void act(std::vector<Alarm>& fired, const Gathered* step);
  void init_weights();
  void resume();
  void save_every();

  const RankContext& ctx_;
  comm::Backend& world_;
  const Gather& gather_;
  const bool lead_;  ///< rank 0: writes, publishes and calls back
  RankStack stack_;
  nn::Trainer trainer_;
  AlarmMonitor monitor_;
  std::unique_ptr<RunMetrics> metrics_;  ///< rank 0's
  AlarmActions alarms_;
  Bytes seen_{0, 0};  ///< this rank's bytes at the end of the previous step
  /// The run decodes image files (data images:DIR): its steps carry what each rank decoded.
  const bool decodes_;
  /// This rank's dataset stats at the end of the previous step: zeros at first, so the first
  /// step also counts what opening the folder left out (its bad_skipped).
  data::DataStats data_seen_;
};

RankLoop::RankLoop(const RankContext& context, comm::Backend& world, int device_index,
                   const Gather& gather)
    : ctx_(context),
      world_(world),
      gather_(gather),
      lead_(world.rank() == 0),
      stack_(context, world, device_index),
      trainer_(context.setup.train, &stack_.mesh_comm(), stack_.compute(), stack_.allocator(),
               context.dataset),
      monitor_(context.setup.alarms),
      alarms_(context.setup, trainer_),
      decodes_(context.setup.images != nullptr) {
  trainer_.context().scope = &stack_.scope();
  // resolve_train refuses init_from with a named resume: a resumed run has its own weights. With
  // resume auto, init_from is where a job starts that has no checkpoint yet (resume()).
  if (!ctx_.setup.init_from.empty() && ctx_.setup.resume != "auto") init_weights();
  if (!ctx_.setup.resume.empty()) resume();
  if (lead_) ctx_.result.parameters = nn::count_parameters(trainer_.model());
  if (const std::string n = lead_ ? images_notice(ctx_.setup) : ""; !n.empty())
    notify(ctx_.callbacks, core::ReportLevel::Info, n);
  if (lead_) metrics_ = std::make_unique<RunMetrics>(ctx_.setup, ctx_.callbacks);
}

/// Pretrained weights into this rank's model; rank 0 keeps the report and notices it once.
void RankLoop::init_weights() {
  nn::WeightReport report = trainer_.init_from(ctx_.setup.init_from);
  if (!lead_) return;
  notify(ctx_.callbacks, core::ReportLevel::Info,
         "init_from " + ctx_.setup.init_from + ": " + report.summary());
  ctx_.result.weights = std::move(report);
}

/// resume: the checkpoint named, or with "auto" the newest complete one among save's, which every
/// rank chooses by itself (the files are shared and no writer is alive, so all choose alike);
/// rank 0 says what was chosen and what was left out.
void RankLoop::resume() {
  const std::string& save = ctx_.setup.save;
  if (ctx_.setup.resume != "auto") return trainer_.load(ctx_.setup.resume);
  const CheckpointChoice choice = newest_checkpoint(save);
  if (lead_) {
    for (const auto& [path, why] : choice.skipped)
      notify(ctx_.callbacks, core::ReportLevel::Warning,
             "resume auto: skipping checkpoint '" + path + "': " + why);
    notify(ctx_.callbacks, core::ReportLevel::Info,
           choice.path.empty() ? "resume auto: no complete checkpoint among '" + save + "' and '" +
                                     save + ".step<N>'; starting at step 0"
                               : "resume auto: resuming from '" + choice.path + "' (step " +
                                     std::to_string(choice.step) + ")");
  }
  if (!choice.path.empty())
    trainer_.load(choice.path);
  else if (!ctx_.setup.init_from.empty())
    init_weights();
}

/// save_every K: after every K-th step but the last, every rank saves (collective) as
/// SAVE.step<N>, then rank 0 removes the oldest beyond keep_checkpoints. The final save is run()'s.
void RankLoop::save_every() {
  const TrainSetup& cfg = ctx_.setup;
  const std::int64_t s = trainer_.next_step();
  if (cfg.save_every <= 0 || s % cfg.save_every != 0 || s >= cfg.train.steps) return;
  trainer_.save(step_checkpoint_path(cfg.save, s));
  if (!lead_) return;
  try {
    prune_step_checkpoints(cfg.save, cfg.keep_checkpoints);
  } catch (const Error& e) {  // an old file left behind does not stop the run
    notify(ctx_.callbacks, core::ReportLevel::Warning, e.what());
  }
}

/// Every rank runs this with the same alarms (decided from the same figures): save is
/// collective. A step's alarms go into its record; a non-finite step's (`step` null) are lines
/// of their own.
void RankLoop::act(std::vector<Alarm>& fired, const Gathered* step) {
  alarms_.save(fired);
  if (!lead_) return;
  if (step)
    metrics_->add_step(step->ranks, fired, decodes_ ? step->data : std::vector<data::DataStats>{});
  else
    metrics_->add_alarm_lines(fired);
  alarms_.report(fired, ctx_.result, ctx_.callbacks);
}

/// One step of this rank and every rank's figures of it.
Gathered RankLoop::train_step() {
  if (FaultState* fault = stack_.fault()) fault->step = trainer_.next_step();
  nn::StepStats st;
  try {
    st = trainer_.step();
  } catch (const NonFiniteError& e) {
    std::vector<Alarm> fired = monitor_.nonfinite(e);  // the state is the one before this step
    act(fired, nullptr);
    throw;
  }
  const Bytes now = stack_.bytes();
  const data::DataStats data_now = ctx_.dataset->stats(world_.rank());
  Gathered step = gather_(st, {now[0] - seen_[0], now[1] - seen_[1]}, data_now - data_seen_,
                          stack_.allocator());
  seen_ = now;
  data_seen_ = data_now;
  return step;
}

void RankLoop::run() {
  while (trainer_.next_step() < ctx_.setup.train.steps) {
    const Gathered step = train_step();
    std::vector<Alarm> fired = monitor_.observe(step.ranks);
    if (lead_) ctx_.result.steps.push_back(step.ranks);
    if (lead_ && decodes_) ctx_.result.step_data.push_back(step.data);
    act(fired, &step);
    if (lead_) {
      metrics_->publish(step, monitor_.counts());
      if (decodes_ && ctx_.callbacks.on_step_data) ctx_.callbacks.on_step_data(step.data);
      if (ctx_.callbacks.on_step) ctx_.callbacks.on_step(step.ranks, fired);
    }
    AlarmActions::stop_if_asked(fired);
    save_every();
    // Rank 0's bookkeeping (the metrics file is written and synced every step) stays out of the
    // next step's time: without this barrier the other ranks start without it and wait for it
    // at their first halo exchange, inside their step.
    world_.barrier();
  }
  if (!ctx_.setup.save.empty()) trainer_.save(ctx_.setup.save);
}

}  // namespace

void rank_loop(const RankContext& context, comm::Backend& world, int device_index,
               const Gather& gather) {
  RankLoop(context, world, device_index, gather).run();
}

}  // namespace tessera::run
