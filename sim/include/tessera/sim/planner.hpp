// Planner: enumerates the ways to run one training configuration on a cluster — data-parallel ×
// pipeline × spatial meshes (shards along W, H, or H × W tiles), micro-batches, activation
// checkpointing, precision (fp32, bf16/fp16 mixed precision) — simulates each
// (memory from the folded replay of the real trainer, time from the event engine) and ranks them by
// predicted iteration time, flagging those that do not fit in device memory.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "tessera/sim/devices.hpp"
#include "tessera/sim/engine.hpp"
#include "tessera/sim/topology.hpp"

namespace tessera::sim {

/// How far a plan has got (PlanOptions::progress).
struct PlanProgress {
  int total = 0;      ///< candidate configurations
  int done = 0;       ///< decided so far: simulated, pruned by a bound, or skipped
  int simulated = 0;  ///< run through the event engine
  int pruned = 0;     ///< not simulated: lower bound above the best so far, or memory cannot fit
  double best_s = 0;  ///< the best fitting iteration time so far; 0 while none
  std::string best;   ///< that configuration, e.g. "dp=2,sp=4 W none fp32"; empty while none
};

/// What to plan for. The batch in `train` is the global batch of one iteration (every candidate
/// trains the same images per iteration, so iteration times compare directly); its mesh-related
/// fields (shard, checkpointing) and its precision are what the planner varies.
struct PlanOptions {
  nn::TrainOptions train;
  /// The devices to use: 0 = every device of the topology.
  int devices = 0;
  std::vector<std::string> shards = {"W", "H", "HW"};
  std::vector<std::string> checkpointing = {"none", "block", "stage"};
  /// Precisions to try (nn::parse_precision names: "fp32", "bf16", "fp16"); each candidate is
  /// simulated in each, with TrainOptions::precision set from it. bf16/fp16 need train.dtype f32.
  std::vector<std::string> precisions = {"fp32"};
  /// Gradient compressions to try (nn::parse_grad_compression names: "none", the dense
  /// all-reduce, and "topk" at train.topk_ratio); each candidate is simulated with each. topk needs
  /// train.grad_reduce fp32, and is skipped with the trainer's reason where it cannot run (device
  /// buckets: a GPU).
  std::vector<std::string> compressions = {"none"};
  /// Pipeline stages to try (the mesh dim "pp"): each value dividing the device count, in the
  /// order given, factors the meshes (dp × pp × spatial); a stage count above the model's units
  /// is skipped with the reason. Each pp > 1 candidate is cut by sim::balanced_stage_starts on
  /// rank 0's device; train.stage_starts is ignored. {1}: no pipeline.
  std::vector<int> pipeline_stages = {1};
  /// Micro-batches per step to try (TrainOptions::micro_batches); a value that does not divide
  /// the batch into micro-batches covering the mesh's dp is skipped with the reason. {1}: none.
  std::vector<int> micro_batches = {1};
  /// Memory limit per device in bytes; 0 = each device's capacity from the catalog.
  double memory_cap_bytes = 0;
  EngineOptions engine;
  /// Simulate every candidate (the old behaviour). Otherwise branch and bound: candidates whose
  /// replayed memory does not fit, or whose lower bound (plan_bounds.hpp) is above the best
  /// fitting time simulated so far, are not simulated (PlanEntry::simulated false). The best
  /// plan is the same either way.
  bool exhaustive = false;
  int threads = 0;  ///< candidates evaluated at once; 0: std::thread::hardware_concurrency
  /// Serialised (never two calls at once), from the planner's threads, at most ~10 per second
  /// plus once at the end.
  std::function<void(const PlanProgress&)> progress;
  /// When it becomes true, plan() returns soon with what it has and PlanResult::cancelled = true.
  const std::atomic<bool>* cancel = nullptr;
};

/// One way to run the configuration: a mesh, a shard dimension, micro-batches, a checkpointing
/// policy, a precision.
struct PlanConfig {
  std::string mesh;  ///< "dp=2,sp=8", "sp_h=2,sp_w=4", "dp=16", "dp=2,pp=2,sp=2"
  int dp = 1, sp_h = 1, sp_w = 1;
  std::string shard;                 ///< "W", "H", "HW", or "-" for no spatial sharding
  std::string checkpointing;         ///< "none", "block", "stage"
  std::string precision = "fp32";    ///< "fp32", "bf16", "fp16" (nn::precision_name)
  std::string compression = "none";  ///< "none" or "topk" (nn::grad_compression_name)
  int pp = 1;                        ///< pipeline stages (the mesh dim "pp"; 1: none)
  int micro_batches = 1;             ///< TrainOptions::micro_batches
  /// With pp > 1: the balanced cut (sim::balanced_stage_starts), set by plan(); else empty.
  std::vector<int> stage_starts;
};

/// "dp=2,sp=4 W none fp32" (", topk" appended for top-k compression, " M=4" for micro-batches):
/// progress lines.
std::string describe(const PlanConfig& c);

/// A candidate configuration: simulated, or pruned with its lower bound and replayed memory.
struct PlanEntry {
  PlanConfig config;
  /// The simulated iteration time; for an entry that was not simulated, its lower bound.
  double iteration_s = 0;
  /// false: pruned without the engine (memory does not fit, or the bound is above the best
  /// fitting time); iteration_s, images_per_s are then bounds and the busy times 0.
  bool simulated = true;
  double lower_bound_s = 0;  ///< the bound (plan_bounds.cpp): ≤ the simulated time
  /// Every class of ranks replayed: the memory figures are exact. false for an entry pruned on
  /// rank 0's replay alone (its bound, or its memory already over the limit): peak_bytes and
  /// activation_peak_bytes are rank 0's, lower bounds on the peaks, and classes is 1.
  bool memory_exact = true;
  double images_per_s = 0;
  std::size_t peak_bytes = 0;             ///< the largest rank's peak (replayed memory)
  std::size_t activation_peak_bytes = 0;  ///< the largest rank's activation peak
  double limit_bytes = 0;                 ///< the cap, or the smallest device capacity used
  bool fits = false;                      ///< peak_bytes <= limit_bytes
  double compute_busy_s = 0;              ///< the busiest device's compute time
  double comm_busy_s = 0;                 ///< the busiest device's communication time
  int classes = 0;                        ///< ranks replayed (one per class of symmetric ranks)
};

/// Whether top-k gradient compression pays, from the plan's own figures: every configuration
/// simulated both dense and with top-k, compared.
struct CompressionVerdict {
  int compared = 0;        ///< configurations simulated both ways
  int faster = 0;          ///< of them, those whose top-k iteration is shorter
  double best_saving = 0;  ///< the largest (dense − top-k) / dense among them (< 0: never faster)
  double worst_saving = 0;  ///< the smallest (most negative: top-k's selection outweighs its bytes)
  int best_dense = -1;      ///< the fastest entry that fits without compression, or -1
  int best_topk = -1;       ///< the fastest entry that fits with top-k, or -1
};

/// A configuration the planner did not simulate, with core's or the simulator's reason.
struct PlanSkip {
  PlanConfig config;  ///< checkpointing and precision "*" when none could help (an invalid mesh)
  std::string reason;
};

struct PlanResult {
  /// By iteration time (a pruned entry's: its bound), fastest first (ties: enumeration order).
  std::vector<PlanEntry> entries;
  std::vector<PlanSkip> skipped;
  int devices = 0;
  bool cancelled = false;  ///< PlanOptions::cancel stopped it: the entries decided so far
  PlanProgress progress;   ///< the final counts
  /// The fastest simulated entry that fits, or -1 when none does.
  int best_fit() const;
  /// The comparison of dense and top-k entries (compared = 0 unless both were planned).
  CompressionVerdict compression_verdict() const;
};

/// The candidate configurations for `devices` ranks: every dp dividing the count (dp = 1 first),
/// then every pp of `pipeline_stages` dividing what is left (in the order given), the rest
/// spatial — along W and H (mesh dim "sp") and as sp_h × sp_w tiles with both factors ≥ 2 — each
/// mesh with every count of `micro_batches`, each with every checkpointing policy, each of those
/// in every precision and each of those with every gradient compression (in the order given; the
/// names are checked by plan(), not here). A mesh with one spatial rank is listed once, shard "-".
struct PlanAxes {
  std::vector<std::string> shards, checkpointing;
  std::vector<std::string> precisions = {"fp32"};
  std::vector<std::string> compressions = {"none"};
  std::vector<int> pipeline_stages = {1};
  std::vector<int> micro_batches = {1};
};
std::vector<PlanConfig> enumerate_plan_configs(int devices, const PlanAxes& axes);
/// enumerate_plan_configs without pipeline stages or micro-batches.
std::vector<PlanConfig> enumerate_plan_configs(
    int devices, const std::vector<std::string>& shards,
    const std::vector<std::string>& checkpointing,
    const std::vector<std::string>& precisions = {"fp32"},
    const std::vector<std::string>& compressions = {"none"});

/// Replays every candidate on `topology` (rank i on its i-th device) and simulates those that can
/// still win (every one with `exhaustive`), `threads` at once, deterministically (the result does
/// not depend on the thread count). Candidates the input or
/// batch cannot support (a dp larger than the batch, more spatial shards than blocks of the model's
/// stride, a halo the shards cannot serve) are skipped with the error core gives; other errors
/// propagate. Throws InvalidArgument for more devices than the topology has, for a precision that
/// is not fp32, bf16 or fp16 (or none at all, or one listed twice), for bf16/fp16 with a
/// train.dtype other than f32 (mixed precision keeps f32 master weights), for a compression that is
/// not none or topk (or none at all, or one listed twice), and for topk with a 16-bit
/// train.grad_reduce (top-k sends f32 values).
PlanResult plan(const PlanOptions& options, const Topology& topology, const DeviceCatalog& catalog);

}  // namespace tessera::sim
