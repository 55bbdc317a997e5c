// The shard map: every convolution's layouts from core's setup, its per-rank halo plans from
// core's make_halo_plan — for every rank up front on small meshes, per layer and replica on demand
// on large ones. Nothing here re-derives a shape or a halo.
#include "shard_map.hpp"

#include <algorithm>
#include <functional>

#include "tessera/core/allocator.hpp"
#include "tessera/nn/layers.hpp"
#include "tessera/nn/models.hpp"
#include "tessera/nn/precision.hpp"

namespace tessera::studio {

std::int64_t ShardInfo::recvBytes() const {
  std::int64_t s = 0;
  for (const HaloRegion& h : recvs) s += h.bytes;
  return s;
}

std::int64_t ShardInfo::sendBytes() const {
  std::int64_t s = 0;
  for (const HaloRegion& h : sends) s += h.bytes;
  return s;
}

std::size_t ShardLayer::haloRegions() const {
  std::size_t n = 0;
  for (const ShardInfo& s : shards) n += s.recvs.size();
  return n;
}

namespace {

ShardInfo shardOf(const ShardMapSource& src, const ShardLayerPlan& plan, int rank) {
  const nn::HaloPlan p = nn::make_halo_plan(plan.spec, plan.in, plan.out, rank, src.halo);
  ShardInfo s;
  s.rank = rank;
  s.coords = src.mesh.coords_of(rank);
  s.own = p.own;
  s.need = p.need;
  for (const nn::HaloPiece& h : p.recvs)
    s.recvs.push_back({h.peer, h.box, h.box.numel() * src.elementBytes});
  for (const nn::HaloPiece& h : p.sends)
    s.sends.push_back({h.peer, h.box, h.box.numel() * src.elementBytes});
  return s;
}

ShardLayer describeLayer(const nn::Conv2d& c) {
  ShardLayer layer;
  layer.name = QString::fromStdString(c.name());
  layer.conv = QString::fromStdString(c.spec().describe());
  layer.shape = c.input_layout().global_shape();
  layer.layout = QString::fromStdString(c.input_layout().to_string());
  return layer;
}

/// Mesh dimensions that split the batch of `in` (data parallelism), and their product.
std::pair<std::vector<int>, int> batchDims(const core::Layout& in) {
  std::vector<int> dims = in.mesh_dims_sharding(0);
  int n = 1;
  for (int d : dims) n *= in.mesh().dim_size(d);
  return {dims, n};
}

}  // namespace

bool ShardMap::complete() const {
  return !layers.empty() && !layers[0].shards.empty() &&
         static_cast<int>(layers[0].shards.size()) == replicas * ranksPerReplica;
}

std::vector<int> ShardMap::replicaRanks(int index, int replica) const {
  const ShardLayerPlan& plan = source->plans.at(index);
  const core::DeviceMesh& mesh = source->mesh;
  const auto [dims, count] = batchDims(plan.in);
  if (replica < 0 || replica >= count) return {};
  // Coordinates of the replica along the batch dimensions (row-major), 0 along the others.
  std::vector<int> coords(mesh.ndim(), 0);
  int rest = replica;
  for (auto d = dims.rbegin(); d != dims.rend(); ++d) {
    coords[*d] = rest % mesh.dim_size(*d);
    rest /= mesh.dim_size(*d);
  }
  std::vector<int> others;
  for (int d = 0; d < mesh.ndim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) others.push_back(d);
  const int first = mesh.rank_at(coords);
  std::vector<int> ranks =
      others.empty() ? std::vector<int>{first} : mesh.group_ranks(others, first);
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

ShardLayer ShardMap::layer(int index, int replica) const {
  ShardLayer l = layers.at(index);
  l.shards.clear();
  for (int r : replicaRanks(index, replica))
    l.shards.push_back(shardOf(*source, source->plans[index], r));
  return l;
}

ShardMap buildShardMap(const nn::TrainOptions& train, const core::DeviceMesh& mesh,
                       int fullMaxRanks) {
  const core::Layout in =
      nn::input_layout(mesh, train.shard, train.batch, train.input, train.model.total_stride());
  std::unique_ptr<nn::Sequential> model = nn::build_model(train.model, train.checkpointing);
  nn::SetupContext ctx;
  ctx.rank = 0;
  ctx.allocator = std::make_shared<core::Allocator>("studio-meta", /*meta=*/true);
  ctx.seed = train.seed;
  ctx.dtype = train.dtype;
  model->setup(in, ctx);  // layouts are global: rank 0's setup gives every layer's
  std::vector<nn::Conv2d*> convs;
  std::function<void(nn::Module&)> walk = [&](nn::Module& m) {
    if (auto* c = dynamic_cast<nn::Conv2d*>(&m)) convs.push_back(c);
    std::vector<nn::Module*> kids;
    m.children(kids);
    for (nn::Module* k : kids) walk(*k);
  };
  walk(*model);
  auto src = std::make_shared<ShardMapSource>();
  src->halo = ctx.halo;
  src->mesh = mesh;
  // Halos travel in the activations' dtype: the 16-bit one in mixed precision.
  src->elementBytes = static_cast<std::int64_t>(
      core::dtype_size(nn::precision_dtype(train.precision, train.dtype)));
  ShardMap map;
  for (nn::Conv2d* c : convs) {
    src->plans.push_back({c->spec(), c->input_layout(), c->output_layout()});
    map.layers.push_back(describeLayer(*c));
  }
  map.source = src;
  map.replicas = src->plans.empty() ? 1 : batchDims(src->plans[0].in).second;
  map.ranksPerReplica = mesh.size() / map.replicas;
  if (mesh.size() > fullMaxRanks) return map;
  for (std::size_t i = 0; i < map.layers.size(); ++i)
    for (int r = 0; r < mesh.size(); ++r)
      map.layers[i].shards.push_back(shardOf(*src, src->plans[i], r));
  return map;
}

}  // namespace tessera::studio
