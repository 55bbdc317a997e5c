// Symmetric-rank folding: ranks whose programs are identical up to a renaming of their peers (every
// data-parallel replica, interior spatial shards with equal local shapes) are replayed once and
// relabelled, and the engine simulates one slab of ranks per kind and mirrors it onto the others.
#pragma once

#include <string>
#include <vector>

#include "tessera/sim/engine.hpp"
#include "tessera/sim/replay.hpp"

namespace tessera::sim {

/// The replays of a mesh with one representative per class of equivalent ranks.
///
/// Two ranks are in one class when, along every mesh dimension d, the local input shapes of the
/// ranks within `window[d]` coordinates of each (and which of those positions lie off the mesh)
/// are equal, and along a dimension named "pp" their coordinates are (pipeline stages run
/// different units). window[d] is 0 for a dimension no point-to-point transfer crosses (then only
/// the rank's own local shape matters: every dp replica with the same batch share is one class) and
/// reach + 1 otherwise, where reach is the largest coordinate distance of any halo peer seen in
/// the representatives' programs (found by iterating to a fixed point; tests compare the result
/// with replaying every rank).
struct FoldedReplay {
  core::DeviceMesh mesh;
  std::vector<RankReplay> classes;  ///< one replay per class: its representative's own program
  std::vector<int> class_of;        ///< world rank → index into `classes`
  std::vector<int> window;          ///< per mesh dimension (see above)

  int num_ranks() const noexcept { return static_cast<int>(class_of.size()); }
  /// How many ranks each class stands for.
  std::vector<int> multiplicity() const;
  /// Rank `rank`'s replay: its class's program with every peer and group renamed (peer at the
  /// same coordinate offset; a collective group keeps the coordinates it spans and takes the
  /// rank's own elsewhere). Equal to replay_rank(options, mesh, rank).
  RankReplay replay_for(int rank) const;
  /// Every rank's replay, in rank order (what replay_all gives).
  std::vector<RankReplay> expand() const;
};

/// Replays one representative per class of `mesh` (see FoldedReplay) with the run's MeshComm
/// options (replay_rank). Throws what replay_rank throws for a bad configuration.
FoldedReplay replay_folded(const nn::TrainOptions& options, const core::DeviceMesh& mesh,
                           const comm::MeshCommOptions& mesh_comm = {});

/// "" when the two replays are identical (rank, coordinates, memory, and every op's kind, name,
/// layer, costs, group, transfers, dependencies and memory snapshot), else a sentence naming the
/// first difference. The folding tests compare replay_for with replay_rank through it.
std::string replay_difference(const RankReplay& a, const RankReplay& b);

/// Simulates one iteration of the folded mesh. Ranks are grouped into slabs: the ranks that share
/// their coordinates along every dimension no halo crosses (for dp × sp, one slab per dp
/// replica). One slab per distinct kind is simulated: per member in order, its class, its device
/// and its place (Topology::node_places: its host's class, its position in the host, which of the
/// slab's hosts it is on), so that slabs of one kind map onto each other by a permutation of
/// interchangeable hosts. Every other slab copies the timeline of the simulated slab of its kind,
/// which assumes that halo traffic of different slabs shares no link that can limit it (true for
/// the presets; tests/sim/fast_engine_test.cpp holds it to EngineKind::Exact on random clusters). A
/// collective starts when every simulated member has reached it and lasts what it lasts for the
/// whole group. SimResult::devices still has one entry per rank (DeviceResult::simulated_as names
/// the rank it copies); the trace covers the simulated ranks. The links and collectives are those
/// of simulating every rank: each copy's halo transfers and the collectives of groups without a
/// simulated member (within a mirrored slab) are renamed from their models and counted on the
/// copies' own routes, a copied collective with the algorithm its model chose (docs/simulator.md,
/// "Links of the copies"). With `fold_engine` false, or options.engine Exact, every rank is
/// simulated from its relabelled replay (expand()), which is exactly
/// simulate_iteration(replay_all(...)).
SimResult simulate_iteration(const FoldedReplay& folded, const Topology& topology,
                             const DeviceCatalog& catalog, const EngineOptions& options = {},
                             bool fold_engine = true);

}  // namespace tessera::sim
