// simulate(): run::simulate as `tessera sim run --trace` (folded replay; every rank simulated on
// small meshes, the folded engine above), then the views' data; planFor(): run::plan as `tessera
// plan`; LatestWinsWorker and SimulationRunner: background runs where the latest wins.
#include "simulation.hpp"

#include <QMetaObject>
#include <QPointer>
#include <chrono>

#include "tessera/core/error.hpp"
#include "tessera/run/plan.hpp"
#include "tessera/run/simulate.hpp"

namespace tessera::studio {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point& t) {
  const Clock::time_point now = Clock::now();
  const double s = std::chrono::duration<double>(now - t).count();
  t = now;
  return s;
}

/// The views' data from a simulated run, each step timed into s.timings.
void buildViewsData(Snapshot& s, const run::SimRun& run, TopologyCache* cache) {
  const ResolvedConfig& rc = run.setup;
  SnapshotTimings& t = s.timings;
  Clock::time_point at = Clock::now();
  s.shards = buildShardMap(rc.train, rc.mesh);
  t.shardMapS = since(at);
  s.timeline = buildTimeline(s.result.trace, s.result.devices);
  setLaneStages(s.timeline, rc.mesh);
  t.timelineS = since(at);
  s.memory = buildMemoryBars(s.result, rc.catalog);
  if (static_cast<int>(s.memory.size()) > kMemoryBarsMax)
    s.memoryGroups = groupMemoryBars(s.memory);
  t.memoryS = since(at);
  TopologyCache local;
  const auto base = (cache ? cache : &local)->get(rc.topology, s.numRanks);
  s.topology = applyResult(*base, rc.topology, s.result);
  t.topologyS = since(at);
  if (needsAggregation(s.topology)) s.topologyAggregate = aggregateTopology(s.topology);
  t.aggregateS = since(at);
}

}  // namespace

std::shared_ptr<const Snapshot> simulate(const StudioConfig& config, TopologyCache* cache) {
  auto s = std::make_shared<Snapshot>();
  s->config = config;
  const auto t0 = Clock::now();
  try {
    Clock::time_point at = t0;
    ResolvedConfig setup = resolveConfig(config);
    s->timings.resolveS = since(at);
    // Every rank simulated on small meshes (a lane per device); folded above, where the trace
    // holds the simulated ranks only and the others show as the one they are the same as.
    const bool everyRank = setup.mesh.size() <= kEveryRankMaxRanks;
    run::SimRun run = run::simulate(std::move(setup), everyRank, /*keep_trace=*/true);
    s->timings.simulateS = since(at);
    s->modelName = QString::fromStdString(run.setup.train.model.name);
    s->meshText = QString::fromStdString(run.setup.mesh.to_string());
    s->numRanks = run.setup.mesh.size();
    s->result = std::move(run.result);
    buildViewsData(*s, run, cache);
    s->setup = std::make_shared<const run::SimSetup>(std::move(run.setup));
  } catch (const std::exception& e) {
    s->error = QString::fromStdString(e.what());
  }
  s->wallS = std::chrono::duration<double>(Clock::now() - t0).count();
  return s;
}

std::string Snapshot::json() const {
  return setup ? run::result_json(*setup, result) : std::string();
}

sim::PlanResult planFor(const StudioConfig& config, const PlanControl& control) {
  run::PlanChoices c;
  c.progress = control.progress;
  c.cancel = control.cancel;
  // As many devices as the configuration's mesh (resolved first: a bad mesh is reported as such);
  // the configuration's own precision (run::plan's default).
  c.devices = resolveConfig(config).mesh.size();
  return run::plan(config.toSpec(), c).result;
}

LatestWinsWorker::LatestWinsWorker(QObject* parent) : QObject(parent) {
  thread_ = std::thread([this] { loop(); });
}

LatestWinsWorker::~LatestWinsWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    pending_.reset();
  }
  cv_.notify_all();
  thread_.join();
}

quint64 LatestWinsWorker::submit(Job job) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_ = std::move(job);
  pendingGeneration_ = ++generation_;
  cv_.notify_all();
  return generation_;
}

quint64 LatestWinsWorker::latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

bool LatestWinsWorker::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ || pending_.has_value();
}

void LatestWinsWorker::loop() {
  for (;;) {
    Job job;
    quint64 gen = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || pending_.has_value(); });
      if (stop_) return;
      job = std::move(*pending_);
      pending_.reset();
      gen = pendingGeneration_;
      running_ = true;
    }
    QMetaObject::invokeMethod(
        this, [this, gen] { emit startedJob(gen); }, Qt::QueuedConnection);
    std::function<void()> deliver = job();
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
      if (stop_) return;
      if (gen != generation_) continue;  // a newer request exists: this result is stale
    }
    // Delivered on this object's (the GUI) thread; dropped there too if a newer request came in
    // while the delivery was queued.
    QMetaObject::invokeMethod(
        this,
        [this, gen, deliver = std::move(deliver)] {
          if (gen == latest()) deliver();
        },
        Qt::QueuedConnection);
  }
}

SimulationRunner::SimulationRunner(QObject* parent) : QObject(parent) {
  qRegisterMetaType<std::shared_ptr<const Snapshot>>();
}

quint64 SimulationRunner::request(const StudioConfig& config) {
  const quint64 next = worker_.latest() + 1;
  return worker_.submit([this, config, next]() -> std::function<void()> {
    auto s = std::const_pointer_cast<Snapshot>(simulate(config, &topologies_));
    s->generation = next;
    std::shared_ptr<const Snapshot> done = s;
    return [this, done] { emit finished(done); };
  });
}

}  // namespace tessera::studio
