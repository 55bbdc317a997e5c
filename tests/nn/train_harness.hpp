// Runs the Trainer over in-process ranks and collects what the training tests compare: the
// per-step losses and gradient norms, the final parameters (replicated: rank 0's copy, checked
// equal on every rank) and each rank's memory figures. A Fault (faulty_comm.hpp) breaks the run on
// purpose, for the tests that show the tolerance catches a broken one.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "nn/faulty_comm.hpp"
#include "support/test_utils.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/data/scene_labels.hpp"
#include "tessera/nn/trainer.hpp"

namespace tessera::test {

/// What one rank computes on: a compute backend and the allocator of the memory it computes in.
struct RankCompute {
  std::unique_ptr<compute::Backend> backend;
  core::AllocatorPtr alloc;
};
using ComputeFactory = std::function<RankCompute(int rank)>;

/// The cpu backend (one thread) and a host allocator: what train() uses by default.
inline RankCompute cpu_compute(int rank) {
  return {std::make_unique<compute::cpu::CpuBackend>(1), std::make_shared<core::Allocator>("rank " + std::to_string(rank))};
}

/// A backend that computes in device memory, and an allocator booking that memory.
inline RankCompute on_device(std::unique_ptr<compute::Backend> b, int rank) {
  auto memory = b->device_memory();
  TESSERA_CHECK(memory != nullptr, "on_device: backend '", b->name(), "' computes in host memory");
  return {std::move(b), std::make_shared<core::Allocator>("rank " + std::to_string(rank), memory)};
}

struct TrainRun {
  std::vector<double> losses, grad_norms, lrs;
  std::vector<double> loss_scales;  ///< per step (rank 0): the loss scale it ran with
  std::vector<bool> skipped;        ///< per step (rank 0): dynamic loss scaling skipped its update
  bool skips_agree = true;          ///< every rank skipped the same steps with the same scale
  std::vector<std::string> names;
  std::vector<std::vector<double>> params;  ///< final values, rank 0
  bool replicas_agree = true;               ///< every rank ends with the same parameters
  std::vector<core::MemStats> memory;       ///< per rank, over the whole run
  long faults_injected = 0;                 ///< operations a Fault broke, over all ranks
  long forward_halo_exchanges = 0;          ///< batch_p2p calls carrying forward halos, over all ranks
};

/// The synthetic dataset matching `o` (same channels, size, classes, seed).
inline std::shared_ptr<const data::Dataset> dataset_for(const nn::TrainOptions& o) {
  data::SyntheticOptions d;
  d.task = o.model.task == nn::Task::Classify ? data::Task::Classify : data::Task::Segment;
  d.channels = static_cast<int>(o.input[0]);
  d.height = static_cast<int>(o.input[1]);
  d.width = static_cast<int>(o.input[2]);
  d.num_classes = o.model.num_classes;
  d.size = 256;
  d.seed = o.seed;
  // A multi-camera model's views are labelled by their scene, as the run layer does.
  return data::scene_labels(data::make_synthetic(d), o.model.views);
}

/// Trains `o.steps` steps on `mesh` (by default the cpu backend, one thread per rank; `compute`
/// gives each rank another backend and memory, e.g. a device). `before` runs on every rank
/// after construction (e.g. to load a checkpoint), `after` after the last step (e.g. to save).
/// `fault` breaks the communication on purpose (Fault::None: a correct run).
inline TrainRun train(const nn::TrainOptions& o, const core::DeviceMesh& mesh,
                      const std::function<void(nn::Trainer&)>& before = {},
                      const std::function<void(nn::Trainer&)>& after = {}, Fault fault = Fault::None,
                      const ComputeFactory& compute = cpu_compute) {
  const int P = mesh.size();
  auto ds = dataset_for(o);
  TrainRun r;
  r.memory.resize(P);
  std::vector<std::vector<std::vector<double>>> finals(P);
  std::vector<std::vector<double>> scales(P);  // per rank: the scale of each step, negative when skipped
  std::mutex mu;
  std::atomic<long> injected{0}, forward_halos{0};
  comm::local::run(P, [&](comm::Backend& local_world) {
    const int rank = local_world.rank();
    auto state = std::make_shared<FaultState>();
    state->fault = fault;
    FaultyComm world(local_world, state);
    comm::MeshComm mc(mesh, world);
    RankCompute rc = compute(rank);
    auto alloc = rc.alloc;
    nn::Trainer t(o, &mc, *rc.backend, alloc, ds);
    state->scope = t.context().scope;
    if (before) before(t);
    while (t.next_step() < o.steps) {
      const nn::StepStats s = t.step();
      scales[rank].push_back(s.skipped ? -s.loss_scale : s.loss_scale);
      if (rank == 0) {
        r.loss_scales.push_back(s.loss_scale);
        r.skipped.push_back(s.skipped);
        r.losses.push_back(s.loss);
        r.grad_norms.push_back(s.grad_norm);
        r.lrs.push_back(s.lr);
      }
    }
    if (after) after(t);
    std::vector<std::vector<double>> ps;
    for (nn::Parameter* p : t.parameters()) ps.push_back(to_doubles(p->value));
    std::lock_guard<std::mutex> lock(mu);
    finals[rank] = std::move(ps);
    r.memory[rank] = alloc->stats();
    injected += state->injected;
    forward_halos += state->halo_batches;
    if (rank == 0)
      for (nn::Parameter* p : t.parameters()) r.names.push_back(p->name);
  });
  r.params = finals[0];
  r.faults_injected = injected;
  r.forward_halo_exchanges = forward_halos;
  for (int q = 1; q < P; ++q) {
    if (finals[q] != finals[0]) r.replicas_agree = false;
    if (scales[q] != scales[0]) r.skips_agree = false;
  }
  return r;
}

}  // namespace tessera::test
