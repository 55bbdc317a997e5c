// The event engine on a folded mesh: one slab of ranks (those sharing their coordinates along the
// dimensions no halo crosses) per distinct kind is simulated, the other slabs copy its timeline.
#include <map>
#include <utility>

#include "engine_impl.hpp"
#include "tessera/core/error.hpp"
#include "tessera/sim/fold.hpp"

namespace tessera::sim {

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
  // rank order; a slab's kind is the class and device of each member in turn.
  std::map<std::vector<int>, std::vector<int>> slabs;
  for (int r = 0; r < n; ++r) {
    std::vector<int> key;
    const std::vector<int> c = f.mesh.coords_of(r);
    for (int d = 0; d < f.mesh.ndim(); ++d)
      if (f.window[d] == 0) key.push_back(c[d]);
    slabs[key].push_back(r);
  }
  std::vector<int> mirror(n, -1);
  std::map<std::vector<std::pair<int, std::string>>, const std::vector<int>*>
      simulated;  // kind → slab
  for (const auto& [key, members] : slabs) {
    std::vector<std::pair<int, std::string>> kind;
    for (int r : members)
      kind.emplace_back(f.class_of[r], options.device.empty() ? topology.nodes()[nodes[r]].device
                                                              : options.device);
    const auto it = simulated.emplace(std::move(kind), &members).first;
    for (std::size_t i = 0; i < members.size(); ++i) mirror[members[i]] = (*it->second)[i];
  }
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
