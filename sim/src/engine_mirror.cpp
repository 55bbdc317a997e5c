// The traffic of a folded simulation's mirrored ranks: every halo transfer and collective a
// simulated rank ran, renamed for each rank that copies it (the renaming of
// FoldedReplay::replay_for) and routed between the renamed ranks' own devices, so that the link
// bytes equal those of simulating every rank.
#include <algorithm>
#include <set>

#include "engine_impl.hpp"
#include "tessera/core/error.hpp"

namespace tessera::sim::detail_engine {

void Engine::add_mirrored_traffic(std::vector<double>& edge_bytes) {
  const int n = static_cast<int>(ranks_.size());
  if (static_cast<int>(active_.size()) == n) return;
  std::vector<std::vector<int>> copies(n);  // simulated rank → the ranks that copy it
  for (int r = 0; r < n; ++r)
    if (mirror_[r] != r) copies[mirror_[r]].push_back(r);
  std::map<std::vector<int>, int> rank_at;  // coordinates → rank
  for (int r = 0; r < n; ++r) rank_at.emplace(ranks_[r].replay->coords, r);
  const auto coords = [&](int r) -> const std::vector<int>& { return ranks_[r].replay->coords; };
  // `peer` moved by the offset from mirror_[r] to r along the dimensions not in `keep`.
  const auto renamed = [&](int peer, int r, const std::vector<bool>& keep) {
    std::vector<int> c = coords(peer);
    for (std::size_t d = 0; d < c.size(); ++d)
      if (!keep[d]) c[d] += coords(r)[d] - coords(mirror_[r])[d];
    const auto it = rank_at.find(c);
    if (it == rank_at.end())
      throw InternalError(detail::cat("sim: folding: renaming rank ", peer, " for rank ", r,
                                      " (a copy of rank ", mirror_[r],
                                      ") leaves the mesh; simulate without folding"));
    return it->second;
  };

  // Halo transfers: rank r sends what its model sends, to the peer at the same coordinate offset.
  const std::vector<bool> keep_none(coords(0).size(), false);
  for (const auto& [pair, bytes] : halo_pair_bytes_)
    for (int r : copies[pair.first]) {
      const int dst = renamed(pair.second, r, keep_none);
      for (int e : topo_.route(ranks_[r].node, ranks_[dst].node))
        edge_bytes[e] += static_cast<double>(bytes);
    }

  // Collectives: a group keeps the coordinates it spans and moves with the rank along the others.
  // A renamed group with a simulated member ran in the simulation itself; the others are added,
  // over the same interval as the collective they copy (the copies' timelines are the models').
  std::map<std::vector<int>, std::vector<std::vector<int>>>
      missing;                                               // group → its unsimulated copies
  std::map<std::vector<int>, std::vector<int>> copied_from;  // an unsimulated copy → its group
  const auto missing_copies =
      [&](const std::vector<int>& group) -> const std::vector<std::vector<int>>& {
    auto it = missing.find(group);
    if (it != missing.end()) return it->second;
    std::vector<bool> spans(keep_none.size(), false);
    for (int m : group)
      for (std::size_t d = 0; d < spans.size(); ++d)
        spans[d] = spans[d] || coords(m)[d] != coords(group[0])[d];
    std::set<std::vector<int>> found;
    for (int m : group)
      for (int r : copies[m]) {
        bool moves = false;
        for (std::size_t d = 0; d < spans.size(); ++d)
          moves = moves || (!spans[d] && coords(r)[d] != coords(m)[d]);
        if (!moves) continue;  // the same group
        std::vector<int> g;
        for (int x : group) g.push_back(renamed(x, r, spans));
        if (std::none_of(g.begin(), g.end(), [&](int x) { return mirror_[x] == x; }))
          found.insert(std::move(g));
      }
    for (const std::vector<int>& g : found)
      if (!copied_from.emplace(g, group).second && copied_from.at(g) != group)
        throw InternalError(
            detail::cat("sim: folding: a collective group of ", g.size(),
                        " ranks copies two simulated groups; simulate without folding"));
    return missing.emplace(group, std::vector<std::vector<int>>(found.begin(), found.end()))
        .first->second;
  };
  // A copy runs the algorithm its model chose (what its own simulation picks on a topology that
  // treats the slabs alike, the assumption that lets the copies take the models' timelines), so
  // its bytes per edge are its plan's transfers along their routes, times each step's repeat
  // count: whole numbers, so they add up to the same doubles in any order.
  const std::size_t simulated = coll_uses_.size();
  for (std::size_t i = 0; i < simulated; ++i)
    for (const std::vector<int>& g : missing_copies(coll_uses_[i].ranks)) {
      const CollectiveUse& u = coll_uses_[i];
      std::vector<int> nodes;
      for (int m : g) nodes.push_back(ranks_[m].node);
      const CollectivePlan plan = plan_collective(topo_, parse_collective_op(u.name),
                                                  parse_algorithm(u.algorithm), nodes, u.bytes);
      std::map<int, double> carried;  // directed edge → bytes, in topology edge order
      for (const CollectiveStep& step : plan.steps)
        for (const Transfer& t : step.transfers)
          for (int e : topo_.route(nodes.at(t.from), nodes.at(t.to)))
            carried[e] += static_cast<double>(t.bytes) * step.repeat;
      CollectiveUse copy{u.name, u.layer, u.algorithm, g, u.bytes, u.start_ps, u.end_ps, {}};
      for (const auto& [e, b] : carried) {
        if (b <= 0) continue;
        coll_edge_bytes_[e] += b;
        if (!opt_.collective_links) continue;
        const DirectedEdge de = topo_.edge(e);
        copy.links.push_back({topo_.nodes()[de.from].name, topo_.nodes()[de.to].name,
                              topo_.links()[de.link].kind, b});
      }
      coll_uses_.push_back(std::move(copy));
    }
  // In the order they started (a copy after its model).
  std::stable_sort(
      coll_uses_.begin(), coll_uses_.end(),
      [](const CollectiveUse& a, const CollectiveUse& b) { return a.start_ps < b.start_ps; });
}

}  // namespace tessera::sim::detail_engine
