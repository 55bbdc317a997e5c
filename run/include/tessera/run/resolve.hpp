// A RunSpec resolved into what core and sim take: the trainer's options and the mesh (training
// and simulation), the backend, threads and files (training), the device catalog, engine options
// and topology with a calibration applied (simulation). The one place front ends convert.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/comm/mesh_comm.hpp"
#include "tessera/run/alarms.hpp"
#include "tessera/core/mesh.hpp"
#include "tessera/nn/trainer.hpp"
#include "tessera/run/spec.hpp"
#include "tessera/sim/devices.hpp"
#include "tessera/sim/engine.hpp"
#include "tessera/sim/topology.hpp"

namespace tessera::run {

/// "3x512x2048" as {3, 512, 2048}; throws InvalidArgument naming field `input`.
core::Shape parse_chw(const std::string& s);

/// "4,9" as {4, 9}: the units where pipeline stages after the first begin, strictly increasing
/// and >= 1 ("" : none, the default balance). Throws InvalidArgument naming field `stage_starts`.
/// Whether they fit the model and the mesh's pp is the Trainer's check (nn::check_stage_starts).
std::vector<int> parse_stage_starts(const std::string& s);

/// Checks the mesh field's text as core::DeviceMesh::parse does, with at most one dimension's
/// size "auto" (dp=auto,sp=2); throws InvalidArgument naming the mesh.
void check_mesh_text(const std::string& mesh);

/// `mesh` with its auto dimension replaced by `world` / (the product of the other dims):
/// "dp=auto,sp=2" for 6 ranks is "dp=3,sp=2"; a mesh without auto is returned as it is. Throws
/// InvalidArgument, naming the world size, when the other dims do not divide `world`.
std::string resolve_mesh_auto(const std::string& mesh, int world);

/// The model field: a preset name, a JSON model file (*.json) or the model's JSON ("{...}").
nn::ModelSpec load_model(const std::string& model);

/// zoom "1:1.5" as {1, 1.5}; throws InvalidArgument naming field `zoom`.
std::pair<double, double> parse_zoom(const std::string& s);

/// mean / std "0.485,0.456,0.406" as its values (one or three); throws InvalidArgument.
std::vector<double> parse_channel_values(const std::string& s);

/// A topology preset name, a path to a topology JSON file when one exists there, or the
/// topology's JSON itself (text starting with '{'); devices (the cpu-host presets' links) from
/// `catalog`.
sim::Topology load_topology(const std::string& spec, const sim::DeviceCatalog& catalog = sim::DeviceCatalog{});

/// The trainer's options and the mesh of `spec`: the model (preset, file or inline JSON) with
/// task, classes, drop path and input channels applied, the optimizer, dtype, steps, overlap and
/// bucket size; the input's layout on the mesh is checked. Throws InvalidArgument naming the field.
struct TrainSetup {
  nn::TrainOptions train;
  core::DeviceMesh mesh;
  comm::MeshCommOptions mesh_comm;  ///< all_reduce, node_dim
  AlarmOptions alarms;              ///< spec.alarm over the defaults
  std::string backend = "local";
  std::string compute = "cpu";  ///< compute backend: cpu or cuda (from spec.device)
  int device_index = 0;         ///< cuda:N's N (one process per rank adds its local rank)
  bool tf32 = false;
  int threads = 1;  ///< resolved: spec.threads, or cores / ranks
  std::string data = "synthetic";
  /// data images:DIR, opened by resolve_train (its layout gave the task and, unless given, the
  /// classes); null for other data.
  std::shared_ptr<const data::Dataset> images;
  std::string save, resume, trace, metrics;  ///< resume "auto": run/checkpoints.hpp chooses
  int save_every = 0;            ///< with save: also save SAVE.step<N> every this many steps; 0 off
  int keep_checkpoints = 3;      ///< the SAVE.step<N> files save_every keeps, newest first
  std::string init_from;         ///< weights to start from (.safetensors), "" for none
  int metrics_port = -1;         ///< live Prometheus metrics on 127.0.0.1 (0: any free port; -1: off)
  std::string metrics_textfile;  ///< the same text, written atomically after every step
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};
/// `check_backend`: a training run — also check that spec.backend is registered and read
/// spec.device as cpu / cuda / cuda:N (a simulation needs no backend, and its device is a model).
/// A mesh dim "auto" takes WORLD_SIZE (comm::read_env) on a multi-process backend; it is refused
/// on the local backend and without check_backend (a simulation or plan needs every size).
TrainSetup resolve_train(const RunSpec& spec, bool check_backend = true);

/// What a simulation takes: the trainer's options and mesh (as resolve_train), the built-in
/// device catalog and engine options with the calibration applied (sim::apply_calibration), the
/// topology loaded from that catalog, and the engine's device and tf32. Checks that the device
/// exists and that the mesh fits the topology.
struct SimSetup {
  nn::TrainOptions train;
  core::DeviceMesh mesh;
  sim::DeviceCatalog catalog;
  sim::EngineOptions engine;
  sim::Topology topology;
  comm::MeshCommOptions mesh_comm;  ///< replayed as the runtime runs it (TrainSetup::mesh_comm)
};
SimSetup resolve_sim(const RunSpec& spec);

}  // namespace tessera::run
