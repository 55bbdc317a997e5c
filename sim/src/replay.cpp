// replay_rank: one rank's training step on meta tensors with recording backends — the runtime's
// own code path, so its allocations and its kernels and transfers are the runtime's.
#include "tessera/sim/replay.hpp"

#include "tessera/comm/mesh_comm.hpp"
#include "tessera/core/error.hpp"
#include "tessera/data/dataset.hpp"

namespace tessera::sim {

namespace {

// Batches of the right shapes and no pixels, for any number of classes: the trainer's Loader
// allocates them (data::allocate_batch, on the meta allocator) as it does in a run; the memory
// model test compares the result against a run on the synthetic loader.
class ShapeOnlyDataset final : public data::Dataset {
 public:
  ShapeOnlyDataset(data::Task task, int num_classes, core::Shape image)
      : task_(task), classes_(num_classes), image_(std::move(image)) {}
  data::Task task() const noexcept override { return task_; }
  int num_classes() const noexcept override { return classes_; }
  core::Shape image_shape() const override { return image_; }
  std::int64_t size() const noexcept override { return 1; }
  void load_into(std::span<const std::int64_t>, const core::Layout&, int, data::Batch&) const override {}

 private:
  data::Task task_;
  int classes_;
  core::Shape image_;
};

}  // namespace

std::shared_ptr<const data::Dataset> shape_only_dataset(const nn::TrainOptions& options) {
  const data::Task task = options.model.task == nn::Task::Classify ? data::Task::Classify : data::Task::Segment;
  return std::make_shared<ShapeOnlyDataset>(task, options.model.num_classes, options.input);
}

RankReplay replay_rank(const nn::TrainOptions& options, const core::DeviceMesh& mesh, int rank,
                       const comm::MeshCommOptions& mesh_comm) {
  TESSERA_CHECK(rank >= 0 && rank < mesh.size(), "replay: rank ", rank, " is not in mesh ", mesh.to_string(),
                " of ", mesh.size(), " ranks");
  auto alloc = std::make_shared<core::Allocator>("replay rank " + std::to_string(rank), /*meta=*/true);
  ProgramLog log(alloc);
  RecordingCompute compute(log);
  std::vector<int> world(mesh.size());
  for (int r = 0; r < mesh.size(); ++r) world[r] = r;
  RecordingComm comm(log, compute, rank, world);
  comm::MeshComm mc(mesh, comm, mesh_comm);
  auto ds = shape_only_dataset(options);
  nn::Trainer trainer(options, &mc, compute, alloc, ds);
  compute.set_scope_source(trainer.context().scope);
  log.reset();
  RankReplay r;
  r.rank = rank;
  r.coords = mesh.coords_of(rank);
  r.memory = trainer.step().memory;
  r.program = log.take();
  for (const nn::Module* u : trainer.units()) r.units.push_back(u->name());
  return r;
}

std::vector<RankReplay> replay_all(const nn::TrainOptions& options, const core::DeviceMesh& mesh,
                                   const comm::MeshCommOptions& mesh_comm) {
  std::vector<RankReplay> out;
  out.reserve(mesh.size());
  for (int r = 0; r < mesh.size(); ++r) out.push_back(replay_rank(options, mesh, r, mesh_comm));
  return out;
}

}  // namespace tessera::sim
