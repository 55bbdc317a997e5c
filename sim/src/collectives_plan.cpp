// Collective plans: rings (with rail-aligned channels across hosts), pipelined trees and chains,
// the hierarchical all-reduce, the pairwise all-to-all and direct steps over a mesh of links, as
// steps of transfers.
#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "tessera/core/error.hpp"
#include "tessera/sim/collectives.hpp"

namespace tessera::sim {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// The group's ranks by host, hosts in order of first appearance, ranks in group order.
std::vector<std::vector<int>> ranks_by_host(const Topology& t, const std::vector<int>& group) {
  std::unordered_map<int, int> slot;  // host → its index in `hosts`
  std::vector<std::vector<int>> hosts;
  int last_host = 0, last_slot = -1;  // consecutive members usually share a host
  for (int r = 0; r < static_cast<int>(group.size()); ++r) {
    const int h = t.nodes()[group[r]].host;
    if (last_slot < 0 || h != last_host) {
      auto [it, fresh] = slot.emplace(h, static_cast<int>(hosts.size()));
      if (fresh) hosts.emplace_back();
      last_host = h;
      last_slot = it->second;
    }
    hosts[last_slot].push_back(r);
  }
  return hosts;
}

/// Ranks per host when the group spans more than one host with the same count on each, else 0.
int even_ranks_per_host(const std::vector<std::vector<int>>& hosts) {
  if (hosts.size() < 2) return 0;
  for (const auto& h : hosts)
    if (h.size() != hosts[0].size()) return 0;
  return static_cast<int>(hosts[0].size());
}

/// One step in which every ring passes `bytes` from each member to the next.
CollectiveStep ring_step(const std::vector<std::vector<int>>& rings, std::int64_t bytes,
                         int repeat) {
  CollectiveStep step;
  step.repeat = repeat;
  for (const auto& ring : rings)
    for (std::size_t i = 0; i < ring.size(); ++i)
      step.transfers.push_back({ring[i], ring[(i + 1) % ring.size()], bytes});
  return step;
}

/// Rail j: the j-th rank of every host, hosts in order (the same count on each).
std::vector<std::vector<int>> build_rails(const std::vector<std::vector<int>>& hosts) {
  std::vector<std::vector<int>> rails(hosts[0].size());
  for (const auto& h : hosts)
    for (std::size_t j = 0; j < rails.size(); ++j) rails[j].push_back(h[j]);
  return rails;
}

/// One step in which each rank of each clique sends `bytes` to every other rank of its clique at
/// once: on a mesh, one transfer per directed link.
CollectiveStep direct_step(const std::vector<std::vector<int>>& cliques, std::int64_t bytes,
                           int repeat) {
  CollectiveStep step;
  step.repeat = repeat;
  for (const auto& c : cliques)
    for (int from : c)
      for (int to : c)
        if (from != to) step.transfers.push_back({from, to, bytes});
  return step;
}

/// Whether Algorithm::Direct applies: one host, or hosts with the same count each; at least 3
/// ranks per host (with 2, a direct step is a ring step); every two ranks on a host joined by a
/// link that routing takes (a one-hop route both ways; routes are cached, and the first pair
/// fails fast off a mesh). A pair routing cannot join is no mesh either.
bool hosts_are_meshes(const Topology& t, const std::vector<int>& group,
                      const std::vector<std::vector<int>>& hosts) {
  if (hosts.size() > 1 && even_ranks_per_host(hosts) == 0) return false;
  if (hosts[0].size() < 3) return false;
  try {
    for (const auto& h : hosts)
      for (std::size_t i = 0; i < h.size(); ++i)
        for (std::size_t j = i + 1; j < h.size(); ++j) {
          const int a = group[h[i]], b = group[h[j]];
          if (t.route(a, b).size() != 1 || t.route(b, a).size() != 1) return false;
        }
  } catch (const InvalidArgument&) {
    return false;
  }
  return true;
}

/// Algorithm::Direct's steps. One host: all_reduce as a direct reduce-scatter then a direct
/// all-gather (the same transfers, so one step repeated twice), the other ops one direct step.
/// Several hosts (all_reduce): direct reduce-scatter of n/L shards within each host, ring
/// all-reduce of each shard over its rail, direct all-gather within each host.
void direct_steps(CollectivePlan& plan, const std::vector<std::vector<int>>& hosts, int p) {
  const std::int64_t n = plan.bytes;
  if (hosts.size() == 1) {
    const int repeat = plan.op == CollectiveOp::AllReduce ? 2 : 1;
    plan.steps.push_back(direct_step(hosts, ceil_div(n, p), repeat));
    return;
  }
  const std::int64_t local = static_cast<std::int64_t>(hosts[0].size());
  const int nh = static_cast<int>(hosts.size());
  plan.steps.push_back(direct_step(hosts, ceil_div(n, local), 1));
  plan.steps.push_back(ring_step(build_rails(hosts), ceil_div(n, local * nh), 2 * (nh - 1)));
  plan.steps.push_back(direct_step(hosts, ceil_div(n, local), 1));
}

/// The rings of Algorithm::Ring: one in rank order, or L rail-aligned ones across hosts (ring c
/// visits the local ranks c, c+1, … of even hosts and the reverse of odd ones, so each
/// host-to-host hop joins equal local indices; with an odd host count the closing hop does not).
std::vector<std::vector<int>> build_rings(const std::vector<std::vector<int>>& hosts, int p) {
  const int local = even_ranks_per_host(hosts);
  if (local <= 1) {
    std::vector<int> ring(p);
    for (int r = 0; r < p; ++r) ring[r] = r;
    return {ring};
  }
  std::vector<std::vector<int>> rings(local);
  for (int c = 0; c < local; ++c)
    for (std::size_t h = 0; h < hosts.size(); ++h)
      for (int k = 0; k < local; ++k) {
        const int pos = (c + (h % 2 == 0 ? k : local - 1 - k)) % local;
        rings[c].push_back(hosts[h][pos]);
      }
  return rings;
}

/// A rooted tree over ranks: parent[r] (-1 for the root) and depth[r].
struct Tree {
  std::vector<int> parent, depth;
  int max_depth = 0;
};

/// Heap-shaped binary tree over `order` (order[0] is the root, order[i]'s parent order[(i-1)/2]),
/// then each member's `chain` hung below it (chains[i][0] == order[i]).
Tree build_tree(const std::vector<std::vector<int>>& chains, const std::vector<int>& order, int p) {
  Tree t;
  t.parent.assign(p, -1);
  t.depth.assign(p, 0);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto& chain = chains[order[i]];
    if (i > 0) {
      const int up = chains[order[(i - 1) / 2]][0];
      t.parent[chain[0]] = up;
      t.depth[chain[0]] = t.depth[up] + 1;
    }
    for (std::size_t k = 1; k < chain.size(); ++k) {
      t.parent[chain[k]] = chain[k - 1];
      t.depth[chain[k]] = t.depth[chain[k - 1]] + 1;
    }
  }
  for (int d : t.depth) t.max_depth = std::max(t.max_depth, d);
  return t;
}

/// Pipelined trees, `chunks` chunks of `chunk_bytes` each per tree. Reduce (`up`): rank v sends
/// chunk i to its parent in step (D − depth v) + i. Broadcast (`down`): v receives chunk i from
/// its parent in step U + depth v − 1 + i, U = D when reducing first, else 0. The steady steps,
/// where every (rank, chunk) slot is busy, are identical and emitted once with a repeat count.
void pipeline_steps(CollectivePlan& plan, const std::vector<Tree>& trees, std::int64_t chunk_bytes,
                    int chunks, bool up, bool down) {
  // Every slot is busy from the step where the deepest rank gets chunk 0 from above (or, without
  // a broadcast, sends it up) to the step where the deepest rank sends its last chunk up (or
  // the shallowest receives its last from the root), c − 1 in both cases.
  int last = 0, steady_from = 0;
  const int steady_to = chunks - 1;
  for (const Tree& t : trees) {
    const int d = t.max_depth, u = up ? d : 0;
    last = std::max(last, (down ? u + d - 1 : d - 1) + chunks - 1);
    steady_from = std::max(steady_from, down ? u + d - 1 : d - 1);
  }
  auto step_at = [&](int k) {
    CollectiveStep s;
    for (const Tree& t : trees) {
      const int d = t.max_depth, u = up ? d : 0;
      for (int v = 0; v < static_cast<int>(t.parent.size()); ++v) {
        if (t.parent[v] < 0) continue;
        const int i_up = k - (d - t.depth[v]), i_down = k - (u + t.depth[v] - 1);
        if (up && i_up >= 0 && i_up < chunks) s.transfers.push_back({v, t.parent[v], chunk_bytes});
        if (down && i_down >= 0 && i_down < chunks)
          s.transfers.push_back({t.parent[v], v, chunk_bytes});
      }
    }
    return s;
  };
  for (int k = 0; k <= last; ++k) {
    if (k == steady_from && steady_to > steady_from) {
      CollectiveStep s = step_at(k);
      s.repeat = steady_to - steady_from + 1;
      plan.steps.push_back(std::move(s));
      k = steady_to;
      continue;
    }
    plan.steps.push_back(step_at(k));
  }
}

/// Chunk count minimising (S + c)·(α + m/(c·B)) for a pipeline of S + 1 stages: c = √(S·m/(α·B)),
/// between 1 and 256, chunks of at least 4 KiB; α and B from the first hop of each tree.
int pipeline_chunks(const Topology& t, const std::vector<int>& group,
                    const std::vector<Tree>& trees, std::int64_t bytes, int stages) {
  double alpha_ps = 1, bw = 1e18;
  for (const Tree& tree : trees)
    for (int v = 0; v < static_cast<int>(tree.parent.size()); ++v)
      if (tree.parent[v] >= 0) {
        alpha_ps = std::max(alpha_ps, double(t.route_latency(group[v], group[tree.parent[v]])));
        bw = std::min(bw, t.route_bw(group[v], group[tree.parent[v]]));
      }
  const double c = std::sqrt(std::max(1, stages - 1) * double(bytes) * 1e12 / (alpha_ps * bw));
  const double by_size = std::max(1.0, std::floor(double(bytes) / 4096));
  return static_cast<int>(std::clamp(std::round(c), 1.0, std::min(256.0, by_size)));
}

void check_group(const Topology& t, const std::vector<int>& group, std::int64_t bytes) {
  TESSERA_CHECK(!group.empty(), "sim: a collective needs at least one rank");
  TESSERA_CHECK(bytes >= 0, "sim: collective of ", bytes, " bytes; sizes are ≥ 0");
  std::vector<bool> seen(t.nodes().size(), false);
  for (std::size_t r = 0; r < group.size(); ++r) {
    const int id = group[r];
    TESSERA_CHECK(id >= 0 && id < static_cast<int>(t.nodes().size()), "sim: rank ", r,
                  " maps to node ", id, ", not in topology '", t.name, "'");
    TESSERA_CHECK(is_compute(t.nodes()[id].kind), "sim: rank ", r, " maps to node \"",
                  t.nodes()[id].name, "\", a ", node_kind_name(t.nodes()[id].kind),
                  "; ranks run on gpu or cpu nodes");
    TESSERA_CHECK(!seen[id], "sim: rank ", r, " maps to node \"", t.nodes()[id].name,
                  "\" like an earlier rank; each rank needs its own device");
    seen[id] = true;
  }
}

/// Why an algorithm may be missing from a group's candidates.
const char* unsupported_hint(Algorithm algo) {
  if (algo == Algorithm::Hierarchical)
    return " (hier needs ranks on ≥ 2 hosts, the same number on each)";
  if (algo == Algorithm::Direct)
    return " (direct needs ≥ 3 ranks on each host joined pairwise by direct links, as on an AMD "
           "Infinity Fabric mesh; across hosts, all_reduce only, the same number on each host)";
  return "";
}

}  // namespace

std::vector<Algorithm> candidate_algorithms(const Topology& t, CollectiveOp op,
                                            const std::vector<int>& group) {
  if (op == CollectiveOp::Broadcast) return {Algorithm::Ring, Algorithm::Tree};
  std::vector<Algorithm> algos;
  if (op == CollectiveOp::AllToAll) {
    algos = {Algorithm::Pairwise};
  } else {
    algos = {Algorithm::Ring};
    if (op == CollectiveOp::AllReduce) algos.push_back(Algorithm::Tree);
  }
  if (group.empty()) return algos;
  const auto hosts = ranks_by_host(t, group);
  if (op == CollectiveOp::AllReduce && even_ranks_per_host(hosts) > 0)
    algos.push_back(Algorithm::Hierarchical);
  // Direct comes last, so that Auto keeps an older algorithm that ties with it. Across hosts only
  // all_reduce has a direct plan (a direct phase within each host around the rail all-reduce).
  if ((hosts.size() == 1 || op == CollectiveOp::AllReduce) && hosts_are_meshes(t, group, hosts))
    algos.push_back(Algorithm::Direct);
  return algos;
}

CollectivePlan plan_collective(const Topology& t, CollectiveOp op, Algorithm algo,
                               const std::vector<int>& group, std::int64_t bytes) {
  check_group(t, group, bytes);
  TESSERA_CHECK(algo != Algorithm::Auto,
                "sim: plan_collective needs a concrete algorithm; "
                "simulate_collective resolves auto");
  const auto allowed = candidate_algorithms(t, op, group);
  if (std::find(allowed.begin(), allowed.end(), algo) == allowed.end()) {
    std::string list;
    for (Algorithm a : allowed) list += (list.empty() ? "" : ", ") + algorithm_name(a);
    throw Unsupported(detail::cat("sim: ", collective_op_name(op), " has no ", algorithm_name(algo),
                                  " algorithm on this ", group.size(), "-rank group",
                                  unsupported_hint(algo), "; use one of: ", list, ", or auto"));
  }
  CollectivePlan plan;
  plan.op = op;
  plan.algorithm = algo;
  plan.bytes = bytes;
  const int p = static_cast<int>(group.size());
  if (p == 1) return plan;
  const auto hosts = ranks_by_host(t, group);

  if (algo == Algorithm::Direct) {
    direct_steps(plan, hosts, p);
  } else if (op == CollectiveOp::AllToAll) {
    for (int s = 1; s < p; ++s) {
      CollectiveStep step;
      for (int r = 0; r < p; ++r) step.transfers.push_back({r, (r + s) % p, ceil_div(bytes, p)});
      plan.steps.push_back(std::move(step));
    }
  } else if (algo == Algorithm::Hierarchical) {
    const int local = even_ranks_per_host(hosts), nh = static_cast<int>(hosts.size());
    const auto rails = build_rails(hosts);
    if (local > 1) plan.steps.push_back(ring_step(hosts, ceil_div(bytes, local), local - 1));
    plan.steps.push_back(ring_step(rails, ceil_div(bytes, std::int64_t{local} * nh), 2 * (nh - 1)));
    if (local > 1) plan.steps.push_back(ring_step(hosts, ceil_div(bytes, local), local - 1));
  } else if (op == CollectiveOp::Broadcast || algo == Algorithm::Tree) {
    // Chains of ranks per host under a tree of hosts, or (one host) a tree of ranks.
    std::vector<std::vector<int>> chains;
    if (hosts.size() > 1 && op == CollectiveOp::AllReduce) {
      chains = hosts;
    } else {
      for (int r = 0; r < p; ++r) chains.push_back({r});
    }
    std::vector<int> order(chains.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::vector<Tree> trees;
    if (op == CollectiveOp::Broadcast && algo == Algorithm::Ring) {  // chain 0 → 1 → … → p−1
      std::vector<int> all(p);
      for (int r = 0; r < p; ++r) all[r] = r;
      trees.push_back(build_tree({all}, {0}, p));
    } else {
      trees.push_back(build_tree(chains, order, p));
      if (op == CollectiveOp::AllReduce && order.size() > 1) {  // the complementary tree
        std::reverse(order.begin(), order.end());
        trees.push_back(build_tree(chains, order, p));
      }
    }
    const std::int64_t per_tree = ceil_div(bytes, static_cast<std::int64_t>(trees.size()));
    const bool up = op == CollectiveOp::AllReduce;
    int depth = 0;
    for (const Tree& tr : trees) depth = std::max(depth, tr.max_depth);
    const int chunks = pipeline_chunks(t, group, trees, per_tree, (up ? 2 : 1) * depth);
    pipeline_steps(plan, trees, ceil_div(per_tree, chunks), chunks, up, true);
  } else {  // rings: all_reduce, all_gather, reduce_scatter
    const auto rings = build_rings(hosts, p);
    const std::int64_t chunk = ceil_div(bytes, std::int64_t{p} * static_cast<int>(rings.size()));
    plan.steps.push_back(
        ring_step(rings, chunk, op == CollectiveOp::AllReduce ? 2 * (p - 1) : p - 1));
  }
  return plan;
}

}  // namespace tessera::sim
