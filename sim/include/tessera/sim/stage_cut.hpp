// Where to cut a model into pipeline stages, by the simulator's own time for each unit: the
// model replayed without its pipeline, each kernel timed as the event engine times it, the times
// added up per unit (nn::Trainer::units()), and the cut that balances them.
#pragma once

#include <string>
#include <vector>

#include "tessera/core/mesh.hpp"
#include "tessera/nn/trainer.hpp"
#include "tessera/sim/devices.hpp"
#include "tessera/sim/engine.hpp"
#include "tessera/sim/replay.hpp"

namespace tessera::sim {

/// `mesh` without its dimension named "pp" (the mesh itself when it has none; "sp=1" when pp was
/// its only dimension): the mesh one stage's ranks shard a unit over.
core::DeviceMesh mesh_without_pp(const core::DeviceMesh& mesh);

/// Per unit of `replay` (RankReplay::units), the time of its compute ops (forward, backward, and
/// the recompute under checkpointing) as kernel_time_ps times them on `device` with `engine`'s
/// calibration, in seconds. An op belongs to the unit whose name is its layer or a dot-separated
/// prefix of it ("stages.0.blocks.1" owns "stages.0.blocks.1.dwconv", not
/// "stages.0.blocks.10.dwconv"); ops of no unit (loss, gradient buckets, optimizer) count nowhere.
std::vector<double> unit_times(const RankReplay& replay, const DeviceSpec& device,
                               const EngineOptions& engine = {});

/// The stage starts (TrainOptions::stage_starts) for `options` on `mesh`: rank 0 of the mesh
/// without "pp" replayed (mesh_without_pp, options.stage_starts ignored), its unit_times, and
/// nn::balanced_stage_starts over as many stages as the "pp" dimension has. Empty without a "pp"
/// dimension or with pp = 1. Throws InvalidArgument when the model has fewer units than stages,
/// and what replay_rank throws for a configuration the trainer refuses.
std::vector<int> balanced_stage_starts(const nn::TrainOptions& options,
                                       const core::DeviceMesh& mesh, const DeviceSpec& device,
                                       const EngineOptions& engine = {});

}  // namespace tessera::sim
