// Symmetric-rank folding of replays: classes of ranks by the local shapes in a window of mesh
// coordinates, one replay per class, and the peer renaming that turns a representative's program
// into any member's.
#include "tessera/sim/fold.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "tessera/core/error.hpp"

namespace tessera::sim {

namespace {

/// The class key of `rank`: per mesh dimension d, the local input shapes of the ranks at
/// coordinate offsets −window[d] … window[d] along d (a marker where the offset leaves the mesh).
std::vector<std::int64_t> class_key(const core::Layout& in, const core::DeviceMesh& mesh, int rank,
                                    const std::vector<int>& window) {
  std::vector<std::int64_t> key;
  const std::vector<int> c = mesh.coords_of(rank);
  for (int d = 0; d < mesh.ndim(); ++d) {
    // Pipeline stages run different units, whatever their shapes: each stage is its own class.
    if (mesh.dim_name(d) == "pp") key.push_back(c[d]);
    for (int k = -window[d]; k <= window[d]; ++k) {
      std::vector<int> n = c;
      n[d] += k;
      if (n[d] < 0 || n[d] >= mesh.dim_size(d)) {
        key.push_back(-1);
        continue;
      }
      for (std::int64_t e : in.local_shape(mesh.rank_at(n))) key.push_back(e);
    }
    key.push_back(-2);  // separates the dimensions
  }
  return key;
}

/// Per mesh dimension, the largest coordinate distance between `r`'s rank and a halo peer.
std::vector<int> halo_reach(const core::DeviceMesh& mesh, const RankReplay& r) {
  std::vector<int> reach(mesh.ndim(), 0);
  for (const ProgramOp& op : r.program)
    for (const P2PTransfer& t : op.transfers) {
      const std::vector<int> pc = mesh.coords_of(t.peer);
      for (int d = 0; d < mesh.ndim(); ++d)
        reach[d] = std::max(reach[d], std::abs(pc[d] - r.coords[d]));
    }
  return reach;
}

}  // namespace

std::vector<int> FoldedReplay::multiplicity() const {
  std::vector<int> m(classes.size(), 0);
  for (int c : class_of) ++m.at(c);
  return m;
}

RankReplay FoldedReplay::replay_for(int rank) const {
  TESSERA_CHECK(rank >= 0 && rank < num_ranks(), "fold: rank ", rank, " is not in mesh ",
                mesh.to_string());
  const RankReplay& rep = classes.at(class_of[rank]);
  RankReplay out;
  out.rank = rank;
  out.coords = mesh.coords_of(rank);
  out.memory = rep.memory;
  out.program = rep.program;
  out.units = rep.units;
  if (rank == rep.rank) return out;
  const int nd = mesh.ndim();
  std::vector<int> offset(nd);
  for (int d = 0; d < nd; ++d) offset[d] = out.coords[d] - rep.coords[d];
  auto shifted = [&](int peer, const std::vector<bool>& keep) {
    std::vector<int> c = mesh.coords_of(peer);
    for (int d = 0; d < nd; ++d) {
      if (keep[d]) continue;
      c[d] += offset[d];
      TESSERA_ASSERT(c[d] >= 0 && c[d] < mesh.dim_size(d), "fold: renaming peer ", peer,
                     " of rank ", rep.rank, " for rank ", rank, " leaves mesh dimension ",
                     mesh.dim_name(d), "; the ranks should not share a class");
    }
    return mesh.rank_at(c);
  };
  const std::vector<bool> keep_none(nd, false);
  std::map<std::vector<int>, std::vector<int>> renamed;  // a representative's group → rank's group
  for (ProgramOp& op : out.program) {
    for (P2PTransfer& t : op.transfers) t.peer = shifted(t.peer, keep_none);
    if (op.group.empty()) continue;
    auto it = renamed.find(op.group);
    if (it == renamed.end()) {
      // The group keeps the coordinates along which its members differ (the dimensions it spans)
      // and moves with the rank along the others.
      std::vector<bool> spans(nd, false);
      const std::vector<int> first = mesh.coords_of(op.group[0]);
      for (int m : op.group) {
        const std::vector<int> mc = mesh.coords_of(m);
        for (int d = 0; d < nd; ++d) spans[d] = spans[d] || mc[d] != first[d];
      }
      std::vector<int> g;
      for (int m : op.group) g.push_back(shifted(m, spans));
      it = renamed.emplace(op.group, std::move(g)).first;
    }
    op.group = it->second;
  }
  return out;
}

std::vector<RankReplay> FoldedReplay::expand() const {
  std::vector<RankReplay> all;
  all.reserve(class_of.size());
  for (int r = 0; r < num_ranks(); ++r) all.push_back(replay_for(r));
  return all;
}

FoldedReplay replay_folded(const nn::TrainOptions& options, const core::DeviceMesh& mesh,
                           const comm::MeshCommOptions& mesh_comm) {
  const core::Layout in = nn::input_layout(mesh, options.shard, options.batch, options.input,
                                           options.model.total_stride());
  FoldedReplay f;
  f.mesh = mesh;
  f.window.assign(mesh.ndim(), 0);
  std::map<int, RankReplay> replayed;  // by rank, kept across rounds
  for (;;) {
    std::map<std::vector<std::int64_t>, int> index;
    std::vector<int> reps;
    f.class_of.assign(mesh.size(), -1);
    for (int r = 0; r < mesh.size(); ++r) {
      auto [it, fresh] =
          index.emplace(class_key(in, mesh, r, f.window), static_cast<int>(reps.size()));
      if (fresh) reps.push_back(r);
      f.class_of[r] = it->second;
    }
    std::vector<int> next = f.window;
    for (int r : reps) {
      auto it = replayed.find(r);
      if (it == replayed.end()) it = replayed.emplace(r, replay_rank(options, mesh, r, mesh_comm)).first;
      const std::vector<int> reach = halo_reach(mesh, it->second);
      for (int d = 0; d < mesh.ndim(); ++d)
        if (reach[d] > 0) next[d] = std::max(next[d], reach[d] + 1);
    }
    if (next == f.window) {
      f.classes.clear();
      for (int r : reps) f.classes.push_back(std::move(replayed.at(r)));
      return f;
    }
    f.window = std::move(next);
  }
}

std::string replay_difference(const RankReplay& a, const RankReplay& b) {
  std::ostringstream os;
  if (a.rank != b.rank || a.coords != b.coords) {
    os << "ranks " << a.rank << " and " << b.rank << " differ in rank or coordinates";
    return os.str();
  }
  if (a.memory.peak != b.memory.peak || a.memory.peak_total != b.memory.peak_total ||
      a.memory.current != b.memory.current)
    return "rank " + std::to_string(a.rank) + ": memory differs";
  if (a.program.size() != b.program.size()) {
    os << "rank " << a.rank << ": " << a.program.size() << " ops against " << b.program.size();
    return os.str();
  }
  for (std::size_t i = 0; i < a.program.size(); ++i) {
    const ProgramOp &x = a.program[i], &y = b.program[i];
    bool transfers_equal = x.transfers.size() == y.transfers.size();
    for (std::size_t k = 0; transfers_equal && k < x.transfers.size(); ++k)
      transfers_equal = x.transfers[k].send == y.transfers[k].send &&
                        x.transfers[k].peer == y.transfers[k].peer &&
                        x.transfers[k].bytes == y.transfers[k].bytes &&
                        x.transfers[k].tag == y.transfers[k].tag;
    const bool equal = x.kind == y.kind && x.name == y.name && x.layer == y.layer && x.op == y.op &&
                       x.micro == y.micro && x.depthwise == y.depthwise && x.dtype == y.dtype &&
                       x.kernel == y.kernel && x.flops == y.flops && x.bytes == y.bytes &&
                       x.group == y.group && transfers_equal && x.deps == y.deps &&
                       x.memory == y.memory;
    if (!equal) {
      os << "rank " << a.rank << ": op " << i << " (" << x.name << " of '" << x.layer
         << "') differs from " << y.name << " of '" << y.layer << "'";
      return os.str();
    }
  }
  return "";
}

}  // namespace tessera::sim
