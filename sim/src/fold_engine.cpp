// The event engine on a folded mesh: one slab of ranks (those sharing their coordinates along the
// dimensions no halo crosses) per distinct kind is simulated, the other slabs copy its timeline.
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "engine_impl.hpp"
#include "tessera/core/error.hpp"
#include "tessera/sim/fold.hpp"

namespace tessera::sim {

namespace {

using Slabs = std::map<std::vector<int>, std::vector<int>>;

/// Per rank, the rank whose timeline it copies (itself when simulated). A slab's kind: per member
/// its class, its device and its place — its host's class, its position in the host and which of
/// the slab's hosts it is on (first-seen order). Two slabs of one kind map onto each other by a
/// permutation of hosts within their classes, an automorphism of the topology: their halos cross
/// the same kinds of links. A slab of a new kind is also tried against a few earlier ones for an
/// automorphism the hosts' symmetry does not give (GPUs of one host on an NVSwitch), verified
/// link by link; a kind nothing maps onto is simulated.
std::vector<int> mirror_slabs(const FoldedReplay& f, const Topology& topology,
                              const EngineOptions& options, const Slabs& slabs) {
  const std::vector<int> nodes = topology.devices();
  const std::vector<Topology::NodePlace> places = topology.node_places();
  using Member = std::tuple<int, std::string, int, int, int>;
  std::map<std::vector<Member>, const std::vector<int>*> kinds;  // kind → the slab it copies
  std::vector<const std::vector<int>*> simulated;                // the slabs simulated
  std::optional<detail_engine::GroupSymmetry> symmetry;
  int tries = 0;  // automorphism searches, O(links) each: a bounded number per simulation
  std::vector<int> mirror(f.num_ranks(), -1);
  for (const auto& [key, members] : slabs) {
    std::vector<Member> kind;
    std::map<int, int> ordinal;  // host → its order among the slab's hosts
    std::vector<int> at;         // the members' nodes
    for (int r : members) {
      const Topology::NodePlace& p = places[nodes[r]];
      const int host = ordinal.emplace(p.host, static_cast<int>(ordinal.size())).first->second;
      kind.emplace_back(f.class_of[r],
                        options.device.empty() ? topology.nodes()[nodes[r]].device : options.device,
                        p.host_class, p.host_class >= 0 ? p.local : nodes[r], host);
      at.push_back(nodes[r]);
    }
    auto [it, fresh] = kinds.emplace(std::move(kind), &members);
    if (fresh) {
      for (const std::vector<int>* model : simulated) {
        if (++tries > 64) break;
        bool same_classes = model->size() == members.size();
        for (std::size_t i = 0; same_classes && i < members.size(); ++i)
          same_classes = f.class_of[(*model)[i]] == f.class_of[members[i]];
        if (!same_classes) continue;
        if (!symmetry) symmetry.emplace(topology);
        std::vector<int> from;
        for (int r : *model) from.push_back(nodes[r]);
        if (symmetry->edge_map(from, at)) {
          it->second = model;
          break;
        }
      }
      if (it->second == &members) simulated.push_back(&members);
    }
    for (std::size_t i = 0; i < members.size(); ++i) mirror[members[i]] = (*it->second)[i];
  }
  return mirror;
}

}  // namespace

SimResult simulate_iteration(const FoldedReplay& f, const Topology& topology,
                             const DeviceCatalog& catalog, const EngineOptions& options,
                             bool fold_engine) {
  const int n = f.num_ranks();
  if (!fold_engine || options.engine == EngineKind::Exact) {
    const std::vector<RankReplay> all = f.expand();
    return simulate_iteration(all, topology, catalog, options);
  }
  const std::vector<int> nodes = topology.devices();
  TESSERA_CHECK(n <= static_cast<int>(nodes.size()), "sim: the mesh has ", n,
                " ranks but topology '", topology.name, "' has only ", nodes.size(),
                " devices; use a larger topology (e.g. dgx-a100:N)");
  // Slabs: ranks with equal coordinates along every uncoupled dimension (window 0), members in
  // rank order (mirror_slabs says which slabs are simulated and which copy them).
  std::map<std::vector<int>, std::vector<int>> slabs;
  for (int r = 0; r < n; ++r) {
    std::vector<int> key;
    const std::vector<int> c = f.mesh.coords_of(r);
    for (int d = 0; d < f.mesh.ndim(); ++d)
      if (f.window[d] == 0) key.push_back(c[d]);
    slabs[key].push_back(r);
  }
  std::vector<int> mirror = mirror_slabs(f, topology, options, slabs);
  std::vector<RankReplay> ranks(n);
  for (int r = 0; r < n; ++r) {
    if (mirror[r] == r) {
      ranks[r] = f.replay_for(r);
      continue;
    }
    ranks[r].rank = r;  // the timeline is the mirror's; the program is never read
    ranks[r].coords = f.mesh.coords_of(r);
    ranks[r].memory = f.classes[f.class_of[r]].memory;
  }
  detail_engine::Engine e(ranks, topology, catalog, options, std::move(mirror));
  e.run();
  return e.result();
}

}  // namespace tessera::sim
