// The shard map: every convolution's layouts from core's setup, its per-rank halo plans from
// core's make_halo_plan — for every rank up front on small meshes, per layer and replica on demand
// on large ones. Nothing here re-derives a shape or a halo.
#include "shard_map.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

#include "tessera/comm/mesh_comm.hpp"
#include "tessera/core/allocator.hpp"
#include "tessera/data/dataset.hpp"
#include "tessera/nn/layers.hpp"
#include "tessera/nn/models.hpp"
#include "tessera/nn/precision.hpp"
#include "tessera/sim/replay.hpp"

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

/// The Trainer's own cut of the model into pipeline stages (explicit stage starts, or its default
/// balance): one trainer for rank 0 on a meta allocator with the simulator's recording backends
/// (nothing computed or sent), asked for its units and stage starts. Empty without a dim "pp".
std::vector<ShardStage> pipelineStages(const nn::TrainOptions& train,
                                       const core::DeviceMesh& mesh) {
  const int pp = mesh.find_dim("pp");
  if (pp < 0 || mesh.dim_size(pp) < 2) return {};
  auto alloc = std::make_shared<core::Allocator>("studio stages", /*meta=*/true);
  sim::ProgramLog log(alloc);
  sim::RecordingCompute compute(log);
  std::vector<int> world(mesh.size());
  std::iota(world.begin(), world.end(), 0);
  sim::RecordingComm comm(log, compute, 0, world);
  comm::MeshComm meshComm(mesh, comm);
  nn::TrainOptions o = train;
  o.loader.prefetch = 0;  // its loader never loads: no thread
  const nn::Trainer t(o, &meshComm, compute, alloc, sim::shape_only_dataset(train));
  std::vector<int> bounds{0};
  bounds.insert(bounds.end(), t.stage_starts().begin(), t.stage_starts().end());
  bounds.push_back(static_cast<int>(t.units().size()));
  std::vector<ShardStage> stages;
  for (std::size_t k = 0; k + 1 < bounds.size(); ++k) {
    ShardStage st{bounds[k], bounds[k + 1], {}};
    for (int i = st.first; i < st.end; ++i)
      st.units << QString::fromStdString(t.units()[static_cast<std::size_t>(i)]->name());
    stages.push_back(std::move(st));
  }
  return stages;
}

/// The stage whose units include module `name` (a unit's name or a dot-separated prefix of it, as
/// sim::unit_times assigns ops); -1 when none does.
int stageOfModule(const std::vector<ShardStage>& stages, const QString& name) {
  for (int k = 0; k < static_cast<int>(stages.size()); ++k)
    for (const QString& u : stages[k].units)
      if (name == u || name.startsWith(u + QLatin1Char('.'))) return k;
  return -1;
}

}  // namespace

int ShardMap::stageOf(int rank) const {
  if (stages.empty() || !source) return -1;
  const int pp = source->mesh.find_dim("pp");
  return pp < 0 || rank < 0 || rank >= source->mesh.size() ? -1 : source->mesh.coord(rank, pp);
}

QString ShardMap::stageText(int stage) const {
  if (stage < 0 || stage >= static_cast<int>(stages.size())) return {};
  const ShardStage& s = stages[stage];
  const QString span = s.units.size() == 1
                           ? s.units.front()
                           : s.units.front() + QStringLiteral(" … ") + s.units.back();
  return QStringLiteral("stage %1 of %2: units %3–%4 (%5)")
      .arg(stage)
      .arg(stages.size())
      .arg(s.first)
      .arg(s.end - 1)
      .arg(span);
}

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
      // One micro-batch's activations, as the Trainer holds them.
      nn::input_layout(mesh, train.shard, train.batch / std::max(1, train.micro_batches),
                       train.input, train.model.total_stride());
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
  map.stages = pipelineStages(train, mesh);
  for (nn::Conv2d* c : convs) {
    src->plans.push_back({c->spec(), c->input_layout(), c->output_layout()});
    map.layers.push_back(describeLayer(*c));
    map.layers.back().stage = stageOfModule(map.stages, map.layers.back().name);
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
