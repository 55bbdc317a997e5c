// The shard map's data: every convolution's input activation with core's per-rank halo plans.
// Up to kFullShardMapRanks ranks every layer is built for every rank up front; above, only the
// layers' descriptions are, and one layer's shards are built when it is shown, for one data-
// parallel replica (the ranks that share a batch slice) — 8,192 rectangles are unreadable anyway.
#pragma once

#include <QString>
#include <QStringList>
#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/core/layout.hpp"
#include "tessera/nn/halo_plan.hpp"
#include "tessera/nn/trainer.hpp"

namespace tessera::studio {

/// One halo message of one rank for one convolution: `box` (global input indices).
struct HaloRegion {
  int peer = -1;
  nn::Box box;
  std::int64_t bytes = 0;
};

/// One rank's part of an activation and the halos the next convolution exchanges.
struct ShardInfo {
  int rank = 0;
  std::vector<int> coords;
  nn::Box own;   ///< what the rank holds
  nn::Box need;  ///< what the convolution reads (own + halos, clipped to the tensor)
  std::vector<HaloRegion> recvs, sends;
  std::int64_t recvBytes() const;
  std::int64_t sendBytes() const;
};

/// The input activation of one convolution of the model, with the per-rank halo plans
/// (nn::make_halo_plan on the layouts core's setup gives the layer).
struct ShardLayer {
  QString name;                     ///< module path ("stem.conv", "stages.0.blocks.0.dwconv")
  QString conv;                     ///< ConvSpec::describe()
  core::Shape shape;                ///< global input shape (N,C,H,W)
  QString layout;                   ///< core::Layout::to_string()
  std::vector<ShardInfo> shards;    ///< by rank (a complete map), or the ranks asked for
  int stage = -1;                   ///< the pipeline stage that runs it; -1 without stages
  std::size_t haloRegions() const;  ///< received pieces over the ranks in `shards`
};

/// Up to this many ranks a shard map holds every layer for every rank.
inline constexpr int kFullShardMapRanks = 64;

/// What building one layer's shards needs: the convolution and its layouts (core's setup).
struct ShardLayerPlan {
  nn::ConvSpec spec;
  core::Layout in, out;
};

/// The specs and layouts of every convolution: enough to build any layer for any ranks later,
/// on any thread (immutable once built).
struct ShardMapSource {
  std::vector<ShardLayerPlan> plans;
  nn::HaloOptions halo;
  std::int64_t elementBytes = 4;  ///< the activations' dtype (16-bit in mixed precision)
  core::DeviceMesh mesh;
};

/// One pipeline stage (mesh dimension "pp") as the Trainer cuts the model: units [first, end) of
/// nn::Trainer::units(), every rank whose "pp" coordinate is its index running them.
struct ShardStage {
  int first = 0, end = 0;
  QStringList units;  ///< their names, in order
};

struct ShardMap {
  /// Every convolution in forward order; [0] reads the model input. `shards` filled for every
  /// rank when complete(), empty otherwise (see layer()).
  std::vector<ShardLayer> layers;
  std::shared_ptr<const ShardMapSource> source;
  int replicas = 1;         ///< data-parallel replicas: distinct batch slices of the input
  int ranksPerReplica = 1;  ///< ranks sharing one batch slice (the spatial shards)
  std::vector<ShardStage> stages;  ///< one per pipeline stage; empty without a dim "pp" over 1

  /// The stage rank `rank` holds (its "pp" coordinate, as nn::Trainer::stage()); -1 without stages.
  int stageOf(int rank) const;
  /// "stage 1 of 2: units 7–12 (stages.2 … head)", "" for a stage that does not exist.
  QString stageText(int stage) const;

  bool complete() const;
  /// The ranks of replica `replica` (0 ≤ replica < replicas) of layer `index`, ascending: the
  /// ranks whose coordinates along the mesh dimensions that shard the batch are replica's.
  std::vector<int> replicaRanks(int index, int replica) const;
  /// Layer `index` with the shards of replica `replica`'s ranks, built now (a few halo plans).
  ShardLayer layer(int index, int replica) const;
};

/// Builds the model (core's build_model), runs setup on a meta allocator and keeps every
/// convolution's layouts; with at most `fullMaxRanks` ranks also every layer's halo plans on every
/// rank. Throws what core throws for an impossible layout.
ShardMap buildShardMap(const nn::TrainOptions& train, const core::DeviceMesh& mesh,
                       int fullMaxRanks = kFullShardMapRanks);

}  // namespace tessera::studio
