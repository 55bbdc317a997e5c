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
#include "topology_aggregate.hpp"
#include "topology_graph.hpp"

namespace tessera::studio {

/// Up to this many ranks the studio simulates every rank (a timeline lane per device); above, the
/// folded engine (the same figures; lanes for the simulated ranks, the others "same as rank r").
inline constexpr int kEveryRankMaxRanks = 64;

/// Where one snapshot's time went, in seconds (the [.scale] cases print them).
struct SnapshotTimings {
  double resolveS = 0;    ///< resolveConfig: model, mesh, topology, catalog
  double simulateS = 0;   ///< run::simulate: the replay and the engine
  double shardMapS = 0;   ///< buildShardMap (layouts; halo plans only on small meshes)
  double timelineS = 0;   ///< buildTimeline
  double memoryS = 0;     ///< buildMemoryBars and groupMemoryBars
  double topologyS = 0;   ///< the topology graph (its base from the cache, figures applied)
  double aggregateS = 0;  ///< aggregateTopology, above AggregateOptions::fullMaxDevices
  double studioS() const { return shardMapS + timelineS + memoryS + topologyS + aggregateS; }
};

/// Everything the views show for one configuration. `error` non-empty: nothing else is valid.
struct Snapshot {
  StudioConfig config;
  quint64 generation = 0;  ///< the request it answers (SimulationRunner)
  QString error;
  QString modelName, meshText;
  int numRanks = 0;
  /// simulate_iteration on the folded replay: every rank simulated up to kEveryRankMaxRanks,
  /// the folded engine above (result.simulated_ranks of them, the trace theirs only).
  sim::SimResult result;
  /// What it was simulated on (model, mesh, topology, catalog).
  std::shared_ptr<const run::SimSetup> setup;
  /// The result's one JSON form (run::result_json), as `tessera sim run --json`: built when asked
  /// (a fifth of a second at 8,192 GPUs that no view needs).
  std::string json() const;
  ShardMap shards;
  TimelineData timeline;
  std::vector<MemoryBar> memory;  ///< one bar per rank
  /// groupMemoryBars(memory) above kMemoryBarsMax devices (what the view draws); empty below.
  std::vector<MemoryBar> memoryGroups;
  TopologyGraph topology;
  /// The topology drawn aggregated (needsAggregation), built here rather than on the GUI thread.
  std::optional<AggregatedTopology> topologyAggregate;
  double wallS = 0;  ///< how long building this snapshot took
  SnapshotTimings timings;
  bool ok() const { return error.isEmpty(); }
};

/// Replays and simulates `config` as `tessera sim run --trace` does (folded above
/// kEveryRankMaxRanks) and builds the views' data; the topology graph's base comes from `cache`
/// when given (the same topology is not rebuilt). Never throws: a bad configuration gives a
/// Snapshot whose `error` says why.
std::shared_ptr<const Snapshot> simulate(const StudioConfig& config,
                                         TopologyCache* cache = nullptr);

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
  TopologyCache topologies_;  ///< used on the worker thread only
  LatestWinsWorker worker_;
};

}  // namespace tessera::studio

Q_DECLARE_METATYPE(std::shared_ptr<const tessera::studio::Snapshot>)
