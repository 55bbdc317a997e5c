// Replay: runs core's real Trainer for one rank of a mesh on meta tensors, with a compute backend
// and a communicator that record instead of computing or communicating. The result is the rank's
// exact per-category memory (the allocator's own bookings) and its program: every kernel and
// every transfer in issue order, with the dependencies the runtime's waits impose.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/comm/backend.hpp"
#include "tessera/comm/mesh_comm.hpp"
#include "tessera/compute/ops.hpp"
#include "tessera/core/allocator.hpp"
#include "tessera/core/mesh.hpp"
#include "tessera/nn/module.hpp"
#include "tessera/nn/trainer.hpp"

namespace tessera::sim {

/// One send or receive of a point-to-point batch; peers are world ranks.
struct P2PTransfer {
  bool send = true;
  int peer = -1;
  std::int64_t bytes = 0;
  int tag = 0;  ///< sends and receives between a pair match in order per tag (comm::P2POp)
};

/// One operation of a rank's program.
struct ProgramOp {
  enum class Kind : std::uint8_t { Compute, Collective, P2P };
  Kind kind = Kind::Compute;
  std::string name;   ///< "conv2d_forward", "all_reduce", "batch_p2p", ...
  std::string layer;  ///< module path, "grad_bucket", "optimizer", "loss"
  int micro = -1;     ///< the micro-batch it was issued in (nn::Scope::micro_batch); -1: none
  // Compute: compute::op_cost of the call.
  compute::OpKind op = compute::OpKind::Add;
  bool depthwise = false;  ///< a grouped convolution with one input channel per group
  /// The call's float dtype (compute::float_lead): bf16/f16 calls are timed at the device's
  /// 16-bit peak.
  core::DType dtype = core::DType::F32;
  /// sim::kernel_class of the call ("conv2d_forward/pointwise", "add", ...): the calibration key.
  std::string kernel;
  double flops = 0;
  double rows = 0;         ///< compute: compute::OpCost::rows
  std::int64_t bytes = 0;  ///< compute: read + written; collective: per-rank buffer; p2p: sum
  // Collective: the group as world ranks, in group-rank order.
  std::vector<int> group;
  // P2P: the batch's sends and receives.
  std::vector<P2PTransfer> transfers;
  /// Earlier ops (indices into the program) that must finish before this one starts: for a
  /// compute op the previous compute op and every communication waited for since; for a
  /// communication op the last compute op issued before it and the waits since.
  std::vector<int> deps;
  /// The allocator's current bytes per category when the op was issued (memory over time).
  std::array<std::int64_t, core::kNumMemCategories> memory{};
};

/// A rank's ops in issue order.
using Program = std::vector<ProgramOp>;

/// Appends ops to a program; shared by the recording compute backend and the recording
/// communicators of one rank (not thread-safe: one rank, one thread).
class ProgramLog {
 public:
  explicit ProgramLog(core::AllocatorPtr allocator = nullptr) : alloc_(std::move(allocator)) {}
  /// Appends `op`, filling in its dependencies and memory snapshot; returns its index.
  int add(ProgramOp op);
  /// Records that the host waited for op `index` (the next op issued depends on it).
  void wait(int index);
  const Program& program() const noexcept { return ops_; }
  Program take() { return std::move(ops_); }
  /// Forgets everything recorded so far (e.g. what model setup issued before the step).
  void reset() {
    ops_.clear();
    last_compute_ = -1;
    waited_.clear();
  }

 private:
  core::AllocatorPtr alloc_;
  Program ops_;
  int last_compute_ = -1;
  std::vector<int> waited_;
};

/// A compute backend that records every call ({op, layer, flops, bytes} from compute::op_cost)
/// and computes nothing. Use it with tensors from a meta allocator.
class RecordingCompute final : public compute::Backend {
 public:
  explicit RecordingCompute(ProgramLog& log) : log_(log) {}
  std::string_view name() const noexcept override { return "recording"; }
  int num_threads() const noexcept override { return 1; }
  void set_num_threads(int) override {}
  void execute(const compute::OpCall& call) override;
  /// Where the current layer's name is read from (the trainer's Context scope); may be null.
  void set_scope_source(const nn::Scope* scope) noexcept { scope_ = scope; }
  const nn::Scope* scope() const noexcept { return scope_; }

 private:
  ProgramLog& log_;
  const nn::Scope* scope_ = nullptr;
};

/// A communicator that records every collective and point-to-point batch (bytes, peers, group
/// as world ranks) and returns Work that is already complete; wait() records the dependency.
/// split() returns recording sub-communicators with the right ranks. Moves no data.
class RecordingComm final : public comm::Backend {
 public:
  /// `world_ranks`: group rank → world rank (size() = its length). `compute` supplies the layer.
  RecordingComm(ProgramLog& log, const RecordingCompute& compute, int rank, std::vector<int> world_ranks);
  std::string_view name() const noexcept override { return "recording"; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return static_cast<int>(world_ranks_.size()); }
  comm::Capabilities capabilities() const noexcept override;
  std::chrono::milliseconds timeout() const noexcept override { return std::chrono::milliseconds(0); }
  comm::WorkPtr all_reduce(comm::BufferView buf, comm::ReduceOp op) override;
  comm::WorkPtr all_gather(comm::BufferView send, comm::BufferView recv) override;
  comm::WorkPtr reduce_scatter(comm::BufferView send, comm::BufferView recv, comm::ReduceOp op) override;
  comm::WorkPtr broadcast(comm::BufferView buf, int root) override;
  comm::WorkPtr all_to_all(comm::BufferView send, comm::BufferView recv) override;
  comm::WorkPtr batch_p2p(const std::vector<comm::P2POp>& ops) override;
  void barrier() override;
  std::unique_ptr<comm::Backend> split(const std::vector<int>& ranks) override;

 private:
  comm::WorkPtr collective(const char* name, std::int64_t bytes);
  ProgramLog& log_;
  const RecordingCompute& compute_;
  int rank_;
  std::vector<int> world_ranks_;
};

/// What replaying one rank gives.
struct RankReplay {
  int rank = 0;
  std::vector<int> coords;  ///< mesh coordinates
  core::MemStats memory;    ///< the meta allocator's figures for the step (as StepStats.memory)
  Program program;
  /// The names of the trainer's units (nn::Trainer::units(), every stage's), in order: the layer
  /// of an op in `program` is a unit's name or starts with it and a dot.
  std::vector<std::string> units;
};

/// Builds the real nn::Trainer for world rank `rank` of `mesh` on a meta allocator and runs one
/// step with the recording backends. No other rank needs to exist: a rank's program and memory
/// do not depend on its peers' data. `mesh_comm` is the run's (run::TrainSetup::mesh_comm): the
/// gradient all-reduce's algorithm and node dimension, so a hierarchical reduction is replayed as
/// the runtime's three collectives on their groups. Throws what the trainer and MeshComm throw for
/// a bad configuration (a node_dim the mesh lacks, hier without a node dimension).
RankReplay replay_rank(const nn::TrainOptions& options, const core::DeviceMesh& mesh, int rank,
                       const comm::MeshCommOptions& mesh_comm = {});

/// A dataset of `options`' image shape, task and classes with no pixels (loading writes nothing),
/// for a Trainer on meta tensors: what replay_rank trains on, for any number of classes.
std::shared_ptr<const data::Dataset> shape_only_dataset(const nn::TrainOptions& options);

/// Replays every rank of `mesh` (each alone; cheap on meta tensors).
std::vector<RankReplay> replay_all(const nn::TrainOptions& options, const core::DeviceMesh& mesh,
                                   const comm::MeshCommOptions& mesh_comm = {});

/// Short name of a program op kind ("compute", "collective", "p2p").
std::string program_op_kind_name(ProgramOp::Kind k);

}  // namespace tessera::sim
