// Trace events carry the micro-batch they belong to (args "micro", core/trace.hpp) in both
// executors: a pp=2 step of two micro-batches has kernels and pipeline transfers of micro-batches
// 0 and 1 on every rank and the step's optimizer none; a step of one micro-batch carries none.
#include <map>
#include <set>
#include <sstream>

#include "sim_test_util.hpp"
#include "support/catch.hpp"
#include "tessera/comm/local.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/core/tracing.hpp"
#include "tessera/data/dataset.hpp"
#include "tessera/nn/trainer.hpp"
#include "tessera/sim/devices.hpp"
#include "tessera/sim/engine.hpp"
#include "tessera/sim/replay.hpp"

using namespace tessera;

namespace {

nn::TrainOptions staged(int micro_batches) {
  nn::TrainOptions o = simtest::small_run("convnext");
  o.batch = 2 * micro_batches;
  o.micro_batches = micro_batches;
  return o;
}

/// The simulator's trace of one step, every rank simulated.
std::vector<core::TraceEvent> simulated(const nn::TrainOptions& o, const core::DeviceMesh& mesh) {
  const sim::DeviceCatalog cat;
  const sim::Topology topo = simtest::star(mesh.size(), 1e11, 1000);
  return sim::simulate_iteration(sim::replay_all(o, mesh), topo, cat, {}).trace;
}

/// The runtime's trace of one step: ranks as threads (local backend, cpu kernels) behind the
/// tracing decorators, sharing the trainer's scope as the run layer's ranks do.
std::vector<core::TraceEvent> measured(const nn::TrainOptions& o, const core::DeviceMesh& mesh) {
  data::SyntheticOptions so;
  so.channels = static_cast<int>(o.input[0]);
  so.height = static_cast<int>(o.input[1]);
  so.width = static_cast<int>(o.input[2]);
  so.num_classes = o.model.num_classes;
  so.size = 16;
  const std::shared_ptr<const data::Dataset> ds = data::make_synthetic(so);
  core::TraceRecorder recorder;
  comm::local::run(mesh.size(), [&](comm::Backend& world) {
    nn::Scope scope;
    compute::cpu::CpuBackend cpu(1);
    const core::TraceTarget target{&recorder, world.rank(), mesh.coords_of(world.rank()), &scope,
                                   nullptr};
    core::TracingComm comm(world, target);
    core::TracingCompute compute(cpu, target);
    comm::MeshComm mc(mesh, comm);
    nn::Trainer trainer(o, &mc, compute, std::make_shared<core::Allocator>("rank"), ds);
    trainer.context().scope = &scope;
    trainer.step();
  });
  // Through the writer and the reader: what a trace file holds.
  std::ostringstream os;
  core::write_chrome_trace(os, recorder.events(), {});
  return core::read_chrome_trace(os.str(), "measured").events;
}

/// Per rank, the micro-batches of its events whose layer satisfies `pick` (-1: events without one).
template <class Pick>
std::map<int, std::set<int>> micro_of(const std::vector<core::TraceEvent>& trace,
                                      const std::string& cat, Pick pick) {
  std::map<int, std::set<int>> out;
  for (const core::TraceEvent& e : trace)
    if (e.ph == 'X' && e.cat == cat && pick(e.layer)) out[e.pid].insert(e.micro);
  return out;
}

bool pipeline_layer(const std::string& layer) { return layer.rfind("pipeline.", 0) == 0; }
bool optimizer_layer(const std::string& layer) { return layer == "optimizer"; }
bool model_layer(const std::string& layer) {
  return !pipeline_layer(layer) && layer != "optimizer" && layer != "grad_bucket";
}

void check_micro_batches(const std::vector<core::TraceEvent>& trace) {
  const std::set<int> both{0, 1};
  const auto kernels = micro_of(trace, "compute", model_layer);
  const auto transfers = micro_of(trace, "halo", pipeline_layer);
  const auto optimizer = micro_of(trace, "compute", optimizer_layer);
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    REQUIRE(kernels.at(rank) == both);                 // the model's kernels: each micro-batch's
    REQUIRE(transfers.at(rank) == both);               // activations forward, gradients back
    REQUIRE(optimizer.at(rank) == std::set<int>{-1});  // once per step: no micro-batch
  }
}

}  // namespace

TEST_CASE("simulated trace events of a pp=2 step of two micro-batches carry micro 0 and 1",
          "[sim][pipeline][trace]") {
  check_micro_batches(simulated(staged(2), core::DeviceMesh::parse("pp=2")));
  // One micro-batch: nothing carries one, as before micro-batches existed.
  for (const core::TraceEvent& e : simulated(staged(1), core::DeviceMesh::parse("pp=2")))
    REQUIRE(e.micro == -1);
}

TEST_CASE("measured trace events of a pp=2 step of two micro-batches carry micro 0 and 1",
          "[sim][pipeline][trace]") {
  check_micro_batches(measured(staged(2), core::DeviceMesh::parse("pp=2")));
  for (const core::TraceEvent& e : measured(staged(1), core::DeviceMesh::parse("pp=2")))
    REQUIRE(e.micro == -1);
}
