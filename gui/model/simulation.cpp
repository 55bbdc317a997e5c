// simulate(): run::simulate as `tessera sim run --trace` (folded replay, every rank simulated),
// then the views' data; planFor(): run::plan as `tessera plan`; LatestWinsWorker and
// SimulationRunner: background runs where the latest wins.
#include "simulation.hpp"

#include <QMetaObject>
#include <QPointer>
#include <chrono>

#include "tessera/core/error.hpp"
#include "tessera/run/plan.hpp"
#include "tessera/run/simulate.hpp"

namespace tessera::studio {

std::shared_ptr<const Snapshot> simulate(const StudioConfig& config) {
  auto s = std::make_shared<Snapshot>();
  s->config = config;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    // Every rank simulated, with the trace: the timeline needs a lane per device.
    run::SimRun run =
        run::simulate(resolveConfig(config), /*every_rank=*/true, /*keep_trace=*/true);
    const ResolvedConfig& rc = run.setup;
    const sim::DeviceCatalog& catalog = rc.catalog;
    s->modelName = QString::fromStdString(rc.train.model.name);
    s->meshText = QString::fromStdString(rc.mesh.to_string());
    s->numRanks = rc.mesh.size();
    s->json = run.to_json();
    s->result = std::move(run.result);
    s->shards = buildShardMap(rc.train, rc.mesh);
    s->timeline = buildTimeline(s->result.trace, s->numRanks);
    s->memory = buildMemoryBars(s->result, catalog);
    s->topology = buildTopologyGraph(rc.topology, s->result, s->numRanks);
  } catch (const std::exception& e) {
    s->error = QString::fromStdString(e.what());
  }
  s->wallS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
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
    auto s = std::const_pointer_cast<Snapshot>(simulate(config));
    s->generation = next;
    std::shared_ptr<const Snapshot> done = s;
    return [this, done] { emit finished(done); };
  });
}

}  // namespace tessera::studio
