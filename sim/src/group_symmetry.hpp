// Internal to the event engine: collectives on groups that a symmetry of the topology maps onto
// each other (the data-parallel groups of the eight rails of a cluster, for one) take the same
// time, and their link bytes are each other's renamed. The engine times one group per such class
// and renames its result for the others (group_symmetry.cpp).
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "tessera/sim/topology.hpp"

namespace tessera::sim::detail_engine {

class GroupSymmetry {
 public:
  /// The topology must outlive this object.
  explicit GroupSymmetry(const Topology& t);

  /// A renaming of the topology's directed edges induced by an automorphism σ of the graph (every
  /// link onto a link between the images of its ends, with the same bandwidth, latency and kind;
  /// every node onto one of the same kind and device) with σ(from[k]) = to[k] for every k and
  /// members on one host mapped to members on one host. Found by propagating the members'
  /// mapping to their neighbours as a product of swaps, then verified link by link; nullopt when
  /// that finds none (the engine then times the group itself). Routes are shortest paths, so σ
  /// maps the routes of `from` onto shortest paths of `to`; where equal-cost paths tie, the
  /// search from `to`'s own members might pick another of them (docs/simulator.md, "The fast
  /// engine").
  std::optional<std::vector<int>> edge_map(const std::vector<int>& from,
                                           const std::vector<int>& to) const;

 private:
  const Topology& t_;
  std::vector<std::vector<int>> out_;  ///< per node: directed edges leaving it
  /// Links by their ends (smaller node id · nodes + larger): what verification looks up.
  std::unordered_multimap<std::int64_t, int> by_ends_;
};

}  // namespace tessera::sim::detail_engine
