// redistribute: one mesh dimension at a time, each step one collective over that dimension.
#include "tessera/comm/redistribute.hpp"

#include <algorithm>
#include <cstring>

#include "tessera/core/error.hpp"

namespace tessera::comm {

using core::Layout;
using core::Placement;
using core::Range;
using core::Shape;
using core::Tensor;

namespace {

struct Step {
  MeshComm& mc;
  int mesh_dim;
  std::vector<int> group;  // world ranks of this rank's sub-group, by coordinate
  int me;                  // index in group
  core::MemCategory cat;
  core::AllocatorPtr alloc;
};

Tensor new_tensor(const Step& s, const Shape& shape, core::DType dt) {
  return Tensor::zeros(shape, dt, s.cat, s.alloc);
}

// Copies t (any strides) into the flat buffer at element offset `off`.
// Views of the flat buffer keep its memory space (host or device), so the copies go where it is.
void pack(const Tensor& t, Tensor& flat, std::int64_t off) {
  if (t.numel() == 0) return;
  flat.narrow(0, off, t.numel()).reshape(t.shape()).copy_from(t);
}

Tensor unpack(const Tensor& flat, std::int64_t off, const Shape& shape) {
  return flat.narrow(0, off, core::shape_numel(shape)).reshape(shape);
}

Shape with_dim(Shape s, int d, std::int64_t v) {
  s[d] = v;
  return s;
}

// Shard(i) → Replicate along the step's mesh dimension.
Tensor gather(const Step& s, const Tensor& x, const Layout& cur, int i) {
  const int p = static_cast<int>(s.group.size());
  std::vector<Range> rg(p);
  std::int64_t maxlen = 0;
  for (int q = 0; q < p; ++q) {
    rg[q] = cur.local_range(s.group[q], i);
    maxlen = std::max(maxlen, rg[q].size());
  }
  const std::int64_t block = core::shape_numel(with_dim(x.shape(), i, maxlen));
  Tensor send = new_tensor(s, {block}, x.dtype());
  pack(x, send, 0);
  Tensor recv = new_tensor(s, {block * p}, x.dtype());
  s.mc.dim(s.mesh_dim).all_gather(buffer_of(send), buffer_of(recv))->wait();
  Tensor out = new_tensor(s, with_dim(x.shape(), i, rg.back().end - rg.front().begin), x.dtype());
  for (int q = 0; q < p; ++q)
    out.narrow(i, rg[q].begin - rg[0].begin, rg[q].size())
        .copy_from(unpack(recv, q * block, with_dim(x.shape(), i, rg[q].size())));
  return out;
}

// Partial → Shard(j): reduce-scatter of the pieces `nxt` assigns along j.
Tensor reduce_scatter(const Step& s, const Tensor& x, const Layout& nxt, int j) {
  const int p = static_cast<int>(s.group.size());
  std::vector<Range> rg(p);
  std::int64_t maxlen = 0;
  for (int q = 0; q < p; ++q) {
    rg[q] = nxt.local_range(s.group[q], j);
    maxlen = std::max(maxlen, rg[q].size());
  }
  const std::int64_t base = rg[0].begin;
  const std::int64_t block = core::shape_numel(with_dim(x.shape(), j, maxlen));
  Tensor send = new_tensor(s, {block * p}, x.dtype());
  for (int q = 0; q < p; ++q) pack(x.narrow(j, rg[q].begin - base, rg[q].size()), send, q * block);
  Tensor recv = new_tensor(s, {block}, x.dtype());
  s.mc.dim(s.mesh_dim).reduce_scatter(buffer_of(send), buffer_of(recv), ReduceOp::Sum)->wait();
  return unpack(recv, 0, with_dim(x.shape(), j, rg[s.me].size())).clone();
}

// Shard(i) → Shard(j): all-to-all.
Tensor all_to_all(const Step& s, const Tensor& x, const Layout& cur, int i, const Layout& nxt, int j) {
  const int p = static_cast<int>(s.group.size());
  std::vector<Range> ri(p), rj(p);
  std::int64_t max_i = 0, max_j = 0;
  for (int q = 0; q < p; ++q) {
    ri[q] = cur.local_range(s.group[q], i);
    rj[q] = nxt.local_range(s.group[q], j);
    max_i = std::max(max_i, ri[q].size());
    max_j = std::max(max_j, rj[q].size());
  }
  const std::int64_t block = core::shape_numel(with_dim(with_dim(x.shape(), i, max_i), j, max_j));
  const std::int64_t jbase = rj[0].begin;
  Tensor send = new_tensor(s, {block * p}, x.dtype());
  for (int q = 0; q < p; ++q) pack(x.narrow(j, rj[q].begin - jbase, rj[q].size()), send, q * block);
  Tensor recv = new_tensor(s, {block * p}, x.dtype());
  s.mc.dim(s.mesh_dim).all_to_all(buffer_of(send), buffer_of(recv))->wait();
  const Shape out_shape = with_dim(with_dim(x.shape(), i, ri.back().end - ri.front().begin), j, rj[s.me].size());
  Tensor out = new_tensor(s, out_shape, x.dtype());
  for (int q = 0; q < p; ++q)
    out.narrow(i, ri[q].begin - ri[0].begin, ri[q].size())
        .copy_from(unpack(recv, q * block, with_dim(out_shape, i, ri[q].size())));
  return out;
}

// Replicate (along this mesh dimension) → Shard(j): keep this rank's slice.
Tensor slice(const Step& s, const Tensor& x, const Layout& nxt, int j) {
  const Range mine = nxt.local_range(s.group[s.me], j);
  const Range first = nxt.local_range(s.group[0], j);
  return x.narrow(j, mine.begin - first.begin, mine.size()).clone();
}

// One placement change on one mesh dimension; `cur` is the layout before, `nxt` after.
Tensor step(const Step& s, const Tensor& x, const Layout& cur, const Layout& nxt) {
  const Placement a = cur.placement(s.mesh_dim), b = nxt.placement(s.mesh_dim);
  if (a == b) return x;
  if (a.is_shard() && b.is_replicate()) return gather(s, x, cur, a.dim());
  if (a.is_shard() && b.is_shard()) return all_to_all(s, x, cur, a.dim(), nxt, b.dim());
  if (a.is_partial() && b.is_shard()) return reduce_scatter(s, x, nxt, b.dim());
  if (a.is_replicate() && b.is_shard()) return slice(s, x, nxt, b.dim());
  if (a.is_partial() && b.is_replicate()) {
    Tensor y = x.clone();
    s.mc.dim(s.mesh_dim).all_reduce(buffer_of(y), ReduceOp::Sum)->wait();
    return y;
  }
  if (a.is_replicate() && b.is_partial()) {
    Tensor y = x.clone();
    if (s.me != 0) y.zero();
    return y;
  }
  // Shard → Partial: gather, then keep the value on coordinate 0.
  const Layout mid = cur.with_placements([&] {
    auto p = cur.placements();
    p[s.mesh_dim] = core::Replicate();
    return p;
  }());
  return step(s, step(s, x, cur, mid), mid, nxt);
}

bool nested(const Layout& l) {
  for (int d = 0; d < l.ndim(); ++d)
    if (l.mesh_dims_sharding(d).size() > 1) return true;
  return false;
}

}  // namespace

Tensor redistribute(MeshComm& mc, const Tensor& local, const Layout& from, const Layout& to) {
  TESSERA_CHECK(from.mesh() == to.mesh(), "redistribute: layouts on different meshes (",
                from.mesh().to_string(), " and ", to.mesh().to_string(), ")");
  TESSERA_CHECK(from.mesh() == mc.mesh(), "redistribute: layout mesh ", from.mesh().to_string(),
                " is not the communicator's mesh ", mc.mesh().to_string());
  TESSERA_CHECK(from.global_shape() == to.global_shape(), "redistribute: global shapes differ (",
                core::shape_str(from.global_shape()), " and ", core::shape_str(to.global_shape()),
                "); redistribute never reshapes");
  TESSERA_CHECK(local.shape() == from.local_shape(mc.rank()), "redistribute: rank ", mc.rank(),
                " holds ", local.describe(), " but layout ", from.to_string(), " gives it ",
                core::shape_str(from.local_shape(mc.rank())));
  const auto& mesh = mc.mesh();
  auto make_step = [&](int d) {
    Step s{mc, d, mesh.group_ranks(d, mc.rank()), mesh.coord(mc.rank(), d), local.category(), local.allocator()};
    return s;
  };
  Tensor x = local.contiguous();
  Layout cur = from;
  auto change = [&](int d, Placement p) {
    auto pl = cur.placements();
    pl[d] = p;
    Layout nxt(mesh, cur.global_shape(), pl, cur.align());
    x = step(make_step(d), x, cur, nxt);
    cur = nxt;
  };
  // The direct path changes one mesh dim at a time; it applies when no intermediate layout
  // shards a tensor dimension on two mesh dims (e.g. (S(0),S(3)) → (S(3),S(2)) passes through
  // (S(3),S(3)) and must go through Replicate instead).
  bool direct = !nested(from) && !nested(to) && from.align() == to.align();
  for (int d = 0, n = mesh.ndim(); direct && d < n; ++d) {
    auto pl = to.placements();
    for (int k = d + 1; k < n; ++k) pl[k] = from.placement(k);
    direct = !nested(Layout(mesh, from.global_shape(), pl, from.align()));
  }
  if (!direct) {
    // General path: gather to Replicate innermost mesh dimension first, then take the target slice.
    for (int d = mesh.ndim() - 1; d >= 0; --d) {
      if (cur.placement(d).is_replicate()) continue;
      change(d, core::Replicate());
    }
    cur = Layout(mesh, cur.global_shape(), cur.placements(), to.align());
    for (int d = 0; d < mesh.ndim(); ++d) change(d, to.placement(d));
  } else {
    for (int d = 0; d < mesh.ndim(); ++d) change(d, to.placement(d));
  }
  return x.is_contiguous() ? (x.shares_storage(local) ? x.clone() : x) : x.contiguous();
}

}  // namespace tessera::comm
