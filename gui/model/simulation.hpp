// Running a configuration: replay + simulate (sim), then the studio's plain data — synchronously
// (simulate) or on a worker thread where the latest request wins (SimulationRunner).
#pragma once

#include <QObject>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "studio_config.hpp"
#include "studio_data.hpp"
#include "tessera/sim/planner.hpp"

namespace tessera::studio {

/// Everything the views show for one configuration. `error` non-empty: nothing else is valid.
struct Snapshot {
  StudioConfig config;
  quint64 generation = 0;  ///< the request it answers (SimulationRunner)
  QString error;
  QString modelName, meshText;
  int numRanks = 0;
  sim::SimResult result;  ///< simulate_iteration on the folded replay, every rank simulated
  std::string
      json;  ///< the result's one JSON form (run::SimRun::to_json), as `tessera sim run --json`
  ShardMap shards;
  TimelineData timeline;
  std::vector<MemoryBar> memory;
  TopologyGraph topology;
  double wallS = 0;  ///< how long building this snapshot took
  bool ok() const { return error.isEmpty(); }
};

/// Replays and simulates `config` exactly as `tessera sim run --trace` does and builds the views'
/// data. Never throws: a bad configuration gives a Snapshot whose `error` says why.
std::shared_ptr<const Snapshot> simulate(const StudioConfig& config);

/// How a background plan reports and is stopped (run::PlanChoices::progress and ::cancel).
struct PlanControl {
  /// Called from the planner's threads (serialised, ~10 per second and once at the end): a view
  /// marshals it to the GUI thread.
  std::function<void(const sim::PlanProgress&)> progress;
  const std::atomic<bool>* cancel =
      nullptr;  ///< true: the plan returns soon, PlanResult::cancelled
};

/// Ranks meshes for `config`'s model, input, batch and topology with run::plan (as `tessera plan`),
/// over as many devices as `config`'s mesh has. Throws tessera::Error for a bad configuration.
sim::PlanResult planFor(const StudioConfig& config, const PlanControl& control = {});

/// Runs jobs on one worker thread; a job submitted while another waits replaces it, and a result
/// is delivered (on the receiver's thread, through `deliver`) only when no newer job was
/// submitted meanwhile: the latest request wins and the GUI thread never blocks.
class LatestWinsWorker : public QObject {
  Q_OBJECT
 public:
  using Job = std::function<std::function<void()>()>;  ///< runs on the worker; returns the delivery
  explicit LatestWinsWorker(QObject* parent = nullptr);
  ~LatestWinsWorker() override;
  /// Queues `job` (dropping any queued one); returns its generation.
  quint64 submit(Job job);
  quint64 latest() const;
  bool busy() const;

 signals:
  void startedJob(quint64 generation);

 private:
  void loop();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Job> pending_;
  quint64 generation_ = 0;
  quint64 pendingGeneration_ = 0;
  bool running_ = false;
  bool stop_ = false;
  std::thread thread_;
};

/// Re-simulates on every request; emits `finished` with the snapshot of the latest request only.
class SimulationRunner : public QObject {
  Q_OBJECT
 public:
  explicit SimulationRunner(QObject* parent = nullptr);
  quint64 request(const StudioConfig& config);
  bool busy() const { return worker_.busy(); }

 signals:
  void finished(std::shared_ptr<const tessera::studio::Snapshot> snapshot);

 private:
  LatestWinsWorker worker_;
};

}  // namespace tessera::studio

Q_DECLARE_METATYPE(std::shared_ptr<const tessera::studio::Snapshot>)
