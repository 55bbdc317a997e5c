// The topology graph in two parts: what depends on the topology alone (nodes, their layout, links,
// the lookups from names and node pairs to links) built once per topology, and one simulation's
// figures (link use, collectives' bytes, halo transfers) applied to a copy by index. At 8,192 GPUs
// the first is most of the work and the studio re-simulates the same topology on every change.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "studio_data.hpp"

namespace tessera::studio {

/// A TopologyGraph without figures, and how to find a link from a simulation's names.
struct TopologyBase {
  TopologyGraph graph;       ///< utilisation, bytes, transfers and collectives all empty
  std::vector<int> devices;  ///< sim::Topology::devices(): rank i runs on node devices[i]
  /// (from node, to node) → (link, direction 0: a→b, 1: b→a); the first link joining them.
  std::unordered_map<std::uint64_t, std::pair<int, int>> linkOf;
  std::uint64_t fingerprint = 0;  ///< topologyFingerprint() of what it was built from
};

/// A hash of the topology's name, nodes, links and the number of ranks placed on it: equal for
/// the same topology built again (a new resolve of the same configuration).
std::uint64_t topologyFingerprint(const sim::Topology& topo, int numRanks);

/// Nodes laid out in rows by kind (compute at the bottom), ranks 0..numRanks-1 placed on the
/// topology's devices, every link. O(nodes log nodes + links).
std::shared_ptr<const TopologyBase> buildTopologyBase(const sim::Topology& topo, int numRanks);

/// A copy of base.graph with `r`'s figures: link use, each collective's bytes per link, and each
/// halo send of the trace along the topology's route. O(links + figures), one hash lookup each.
TopologyGraph applyResult(const TopologyBase& base, const sim::Topology& topo,
                          const sim::SimResult& r);

/// The last topology's base, reused while the topology stays the same. Not thread-safe: one per
/// worker (SimulationRunner's).
class TopologyCache {
 public:
  std::shared_ptr<const TopologyBase> get(const sim::Topology& topo, int numRanks);
  int builds() const { return builds_; }  ///< how many bases were built (tests)

 private:
  std::shared_ptr<const TopologyBase> base_;
  int builds_ = 0;
};

}  // namespace tessera::studio
