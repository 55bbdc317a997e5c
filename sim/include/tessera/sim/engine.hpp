// Event simulation of one training iteration from the replayed programs of every rank: per device
// a compute stream, a halo (point-to-point) stream and a collective stream, dependencies from the
// program, kernel times from a roofline over the device catalog, transfers over the topology.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/core/trace.hpp"
#include "tessera/sim/collectives.hpp"
#include "tessera/sim/devices.hpp"
#include "tessera/sim/replay.hpp"
#include "tessera/sim/topology.hpp"

namespace tessera::sim {

/// A kernel class's measured speed (tessera calibrate): a call takes
/// overhead_s + flops / flops_per_s + bytes / bytes_per_s, a zero rate meaning no such term. The
/// terms add up (they are fitted together): the CPU kernels overlap little of their memory
/// traffic with their arithmetic.
struct KernelRate {
  double flops_per_s = 0;  ///< FLOP/s of the arithmetic term (0: no such term)
  double bytes_per_s = 0;  ///< bytes read + written per second of the memory term (0: none)
  double overhead_s = 0;   ///< fixed time per call: dispatch, thread wake-up, small-size effects
  double row_s = 0;        ///< time per output row (compute::OpCost::rows; 0: no such term)
  /// The far-memory term: a call's bytes beyond `near_bytes` (a core's L2 on the host) cost
  /// 1 / far_bytes_per_s more each — a large call's operands come from memory, not from the
  /// shared cache where a smaller call finds them (0: no such term).
  double far_bytes_per_s = 0;
  double near_bytes = 0;
  /// overhead + flops / flops_per_s + bytes / bytes_per_s + rows · row_s + far bytes / far rate.
  double seconds(double flops, double bytes, double rows) const {
    return overhead_s + (flops_per_s > 0 ? flops / flops_per_s : 0.0) + (bytes_per_s > 0 ? bytes / bytes_per_s : 0.0) +
           rows * row_s + (far_bytes_per_s > 0 && bytes > near_bytes ? (bytes - near_bytes) / far_bytes_per_s : 0.0);
  }
};

/// What a rank loses each time it waits for a communication op, beyond the transfer the link
/// model times (Calibration::waits).
struct WaitCosts {
  double p2p_s = 0;         ///< per halo exchange (batch_p2p) waited for
  double collective_s = 0;  ///< per collective waited for
};

/// When a rank's communication moves (comm::Capabilities::overlaps_compute).
enum class CommProgress : std::uint8_t {
  /// Overlaps, for every device for now: on the calibrated cpu-host checks InCalls predicted no
  /// better (docs/simulator.md, "When communication moves").
  Auto,
  /// While the rank computes: a transfer or collective runs on its own stream from its post.
  Overlaps,
  /// Only inside the backend's calls: a collective runs whole inside its post, so the next kernel
  /// waits for it. A halo exchange is timed as with Overlaps, since its sends leave in the post.
  InCalls,
};

/// "auto", "overlaps", "in-calls".
std::string_view comm_progress_name(CommProgress p) noexcept;
/// Parses comm_progress_name's names; throws InvalidArgument naming them.
CommProgress parse_comm_progress(std::string_view name);

/// How much of the cluster the engine simulates one by one.
enum class EngineKind : std::uint8_t {
  /// Symmetric ranks simulated once per slab kind (with a FoldedReplay), routes found through the
  /// hosts' symmetry (Topology::set_symmetric_routing), and a collective timed once per class of
  /// groups that a symmetry of the topology maps onto each other, its link bytes renamed for the
  /// others. Its cost grows with what differs, not with the GPU count (docs/simulator.md, "The
  /// fast engine"); tests hold it to Exact on random clusters and meshes.
  Fast,
  /// The reference: every rank's program, every route by its own search, every group timed.
  Exact,
};

/// "fast", "exact".
std::string_view engine_kind_name(EngineKind k) noexcept;
/// Parses engine_kind_name's names; throws InvalidArgument naming them.
EngineKind parse_engine_kind(std::string_view name);

/// How kernels and transfers are timed.
struct EngineOptions {
  /// Fast (the default) or the exact reference engine.
  EngineKind engine = EngineKind::Fast;
  /// Device model of every rank (catalog key); empty = the device each topology node names.
  std::string device;
  /// Use the TF32 tensor-core peak for convolutions and GEMMs (when the device has one).
  bool tf32 = false;
  /// Efficiency per op name ("conv2d_forward", "adamw_step", ...), overriding the device's class
  /// efficiency (eff_gemm, eff_depthwise, eff_elementwise): the calibration hook.
  std::map<std::string, double> efficiency;
  /// Measured speed per kernel class (ProgramOp::kernel, e.g. "conv2d_forward/pointwise") or op
  /// name ("adamw_step"), the class looked up first: a compute op found here is timed by its
  /// rate and overhead instead of the roofline and the launch overhead. apply_calibration
  /// (calibration.hpp) fills it from a `tessera calibrate` file.
  std::map<std::string, KernelRate> kernel_rates;
  /// The device (catalog key) kernel_rates were measured on; other devices keep the roofline.
  /// Empty: every device.
  std::string kernel_rates_device;
  /// The float dtypes kernel_rates were timed in (apply_calibration: the calibration's
  /// precisions). A 16-bit op on kernel_rates_device in a dtype not listed is refused: its rates
  /// would otherwise come from the f32 kernels, which run at other speeds. Empty: not checked.
  std::vector<core::DType> kernel_rates_dtypes;
  /// Added to a compute op for each communication op it waits for, on kernel_rates_device (the
  /// calibrated host: blocking, waking, the receiver's copy and the peers' jitter).
  WaitCosts waits;
  bool launch_overhead = true;  ///< add the device's per-kernel launch overhead
  bool trace = true;            ///< fill SimResult::trace (the planner and bench_sim need no trace)
  /// Fill CollectiveUse::links (the studio's per-collective link view); the totals in
  /// SimResult::links are filled either way (the planner and bench_sim need only those).
  bool collective_links = true;
  Algorithm collective_algorithm = Algorithm::Auto;
  /// When communication moves.
  CommProgress comm_progress = CommProgress::Auto;
};

/// One device's figures over the iteration.
struct DeviceResult {
  int rank = 0;
  /// The rank whose simulated timeline these figures are: `rank` itself, or with symmetric-rank
  /// folding (fold.hpp) the equivalent rank that was simulated in its place.
  int simulated_as = 0;
  std::string device;       ///< catalog key
  Picos end_ps = 0;         ///< when its last op finished
  Picos compute_busy_ps = 0;
  Picos comm_busy_ps = 0;   ///< time with at least one transfer or collective in flight
  core::MemStats memory;    ///< from the replay
};

/// One directed link that carried data.
struct LinkUse {
  std::string from, to, kind;
  double bytes = 0;
  double utilisation = 0;  ///< bytes / (bandwidth · iteration time)
};

/// The bytes one collective put on one direction of a link.
struct CollectiveLinkBytes {
  std::string from, to, kind;  ///< as LinkUse
  double bytes = 0;
};

/// One collective of the iteration as sim's collective model ran it: simulate_collective's steps
/// (ring, tree, hierarchical, pairwise) routed over the topology, each transfer's bytes counted
/// on every link of its route. The links' sum over all collectives is what LinkUse adds to the
/// point-to-point bytes.
struct CollectiveUse {
  std::string name, layer;     ///< the op's ("all_reduce", the gradient bucket's layer)
  std::string algorithm;       ///< the algorithm simulate_collective chose ("ring", "tree", ...)
  std::vector<int> ranks;      ///< the group, world ranks in group order
  std::int64_t bytes = 0;      ///< the per-rank buffer
  Picos start_ps = 0, end_ps = 0;
  /// Directions that carried bytes, in topology edge order (empty unless
  /// EngineOptions::collective_links).
  std::vector<CollectiveLinkBytes> links;
};

/// One link of the critical path: an op that ran over [start_ps, end_ps], wait_ps after the
/// previous link ended (or after time 0, for the first). A halo link is the transfer of a
/// point-to-point batch that finished last, from its later-posted side to the other.
struct CriticalStep {
  int rank = 0;
  int op = -1;               ///< index into that rank's program
  std::string stream;        ///< "compute", "halo" or "collective"
  std::string name, layer;   ///< the op's
  int peer = -1;             ///< a halo link: the rank at the other end of the transfer
  Picos start_ps = 0, end_ps = 0;
  Picos wait_ps = 0;
  Picos dur_ps() const { return end_ps - start_ps; }
};

struct SimResult {
  Picos iteration_ps = 0;
  /// The chain of ops, across streams and ranks, whose durations and dependencies set the
  /// iteration time, in time order: each link is the dependency (program order, stream order, a
  /// collective's last arrival, a transfer's later side) that finished last before the next one
  /// started, so the durations plus the waits add up to iteration_ps. Over the simulated ranks
  /// (with folding, a mirrored rank's copy is not on it). Its trace events carry critical = true.
  std::vector<CriticalStep> critical_path;
  std::vector<DeviceResult> devices;  ///< by rank (every rank, also when folded)
  int simulated_ranks = 0;            ///< ranks whose programs ran (fewer than devices when folded)
  std::vector<LinkUse> links;         ///< links that carried data, busiest first
  /// Collectives that moved data (a group of more than one rank, bytes > 0, not a barrier), in
  /// the order they started. Folded: each run once, plus the copies of those whose renamed group
  /// has no simulated member, over their models' intervals (fold.hpp, simulate_iteration).
  std::vector<CollectiveUse> collectives;
  std::vector<core::TraceEvent> trace;  ///< core's trace schema (write with core::write_chrome_trace)
  std::vector<std::pair<int, std::string>> process_names;
};

/// The time of one kernel on `device`: max(flops / (peak · eff), bytes / (bandwidth · eff)) plus
/// the launch overhead, rounded up to whole picoseconds. eff is the op's class efficiency
/// (convolutions and GEMMs: eff_gemm, depthwise convolutions: eff_depthwise, the rest:
/// eff_elementwise) unless options.efficiency names the op. When options.kernel_rates has the
/// op's kernel class or name, the measured rate and overhead are used instead.
Picos kernel_time_ps(const ProgramOp& op, const DeviceSpec& device, const EngineOptions& options);

/// Simulates one iteration. `ranks[i]` is world rank i's replay (every rank of the mesh, in rank
/// order); rank i runs on topology.devices()[i]. Point-to-point transfers share the network
/// max-min fairly (FlowNetwork); a collective starts once every member has reached it and its
/// collective stream is free, and lasts what simulate_collective gives on an idle network.
/// Deterministic: events are ordered by (time, sequence). Throws InvalidArgument for a topology
/// with too few devices or an unknown device, InternalError when the programs deadlock.
SimResult simulate_iteration(const std::vector<RankReplay>& ranks, const Topology& topology,
                             const DeviceCatalog& catalog, const EngineOptions& options = {});

}  // namespace tessera::sim
