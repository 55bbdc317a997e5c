// The simulator's stage cut: per-unit kernel time from a replay without the pipeline, balanced by
// core's nn::balanced_stage_starts (the same cut the trainer makes from its own unit costs).
#include "tessera/sim/stage_cut.hpp"

#include <unordered_map>

#include "tessera/nn/pipeline.hpp"

namespace tessera::sim {

core::DeviceMesh mesh_without_pp(const core::DeviceMesh& mesh) {
  const int pp = mesh.find_dim("pp");
  if (pp < 0) return mesh;
  std::vector<int> shape;
  std::vector<std::string> names;
  for (int d = 0; d < mesh.ndim(); ++d) {
    if (d == pp) continue;
    shape.push_back(mesh.dim_size(d));
    names.push_back(mesh.dim_name(d));
  }
  return shape.empty() ? core::DeviceMesh() : core::DeviceMesh(shape, names);
}

std::vector<double> unit_times(const RankReplay& replay, const DeviceSpec& device,
                               const EngineOptions& engine) {
  std::unordered_map<std::string, int> unit_of;
  for (std::size_t u = 0; u < replay.units.size(); ++u)
    unit_of.emplace(replay.units[u], static_cast<int>(u));
  std::vector<double> seconds(replay.units.size(), 0.0);
  for (const ProgramOp& op : replay.program) {
    if (op.kind != ProgramOp::Kind::Compute) continue;
    // The longest dot-separated prefix of the layer that names a unit.
    std::string name = op.layer;
    auto it = unit_of.find(name);
    while (it == unit_of.end()) {
      const std::size_t dot = name.rfind('.');
      if (dot == std::string::npos) break;
      name.resize(dot);
      it = unit_of.find(name);
    }
    if (it == unit_of.end()) continue;
    seconds[static_cast<std::size_t>(it->second)] +=
        static_cast<double>(kernel_time_ps(op, device, engine)) /
        static_cast<double>(kPicosPerSecond);
  }
  return seconds;
}

std::vector<int> balanced_stage_starts(const nn::TrainOptions& options,
                                       const core::DeviceMesh& mesh, const DeviceSpec& device,
                                       const EngineOptions& engine) {
  const int pp = mesh.find_dim("pp");
  const int stages = pp < 0 ? 1 : mesh.dim_size(pp);
  if (stages <= 1) return {};
  nn::TrainOptions one = options;
  one.stage_starts.clear();
  const RankReplay r = replay_rank(one, mesh_without_pp(mesh), 0);
  return nn::balanced_stage_starts(unit_times(r, device, engine), stages);
}

}  // namespace tessera::sim
