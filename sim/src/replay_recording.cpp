// ProgramLog, RecordingCompute and RecordingComm: the backends a replay runs the trainer with.
// They record each call with its cost and dependencies and do nothing else.
#include <algorithm>

#include "tessera/core/error.hpp"
#include "tessera/sim/kernel_class.hpp"
#include "tessera/compute/op_table.hpp"
#include "tessera/sim/replay.hpp"

namespace tessera::sim {

std::string program_op_kind_name(ProgramOp::Kind k) {
  switch (k) {
    case ProgramOp::Kind::Compute: return "compute";
    case ProgramOp::Kind::Collective: return "collective";
    case ProgramOp::Kind::P2P: return "p2p";
  }
  return "?";
}

int ProgramLog::add(ProgramOp op) {
  const int index = static_cast<int>(ops_.size());
  op.deps.clear();
  // Compute ops run in issue order on one stream; a communication op can start once the data it
  // sends has been produced, i.e. after the last kernel issued before it.
  if (last_compute_ >= 0) op.deps.push_back(last_compute_);
  for (int w : waited_)
    if (std::find(op.deps.begin(), op.deps.end(), w) == op.deps.end()) op.deps.push_back(w);
  std::sort(op.deps.begin(), op.deps.end());
  waited_.clear();
  if (alloc_) {
    const core::MemStats s = alloc_->stats();
    for (int c = 0; c < core::kNumMemCategories; ++c) op.memory[c] = static_cast<std::int64_t>(s.current[c]);
  }
  if (op.kind == ProgramOp::Kind::Compute) last_compute_ = index;
  ops_.push_back(std::move(op));
  return index;
}

void ProgramLog::wait(int index) {
  TESSERA_ASSERT(index >= 0 && index < static_cast<int>(ops_.size()), "replay: wait on unknown op ", index);
  waited_.push_back(index);
}

void RecordingCompute::execute(const compute::OpCall& call) {
  const compute::OpCost cost = compute::op_cost(call);
  ProgramOp op;
  op.kind = ProgramOp::Kind::Compute;
  op.op = call.kind;
  op.name = std::string(compute::op_name(call.kind));
  op.kernel = kernel_class(call);
  op.layer = scope_ ? scope_->layer : std::string();
  op.micro = scope_ ? scope_->micro_batch : -1;
  op.flops = cost.flops;
  op.rows = cost.rows;
  op.bytes = cost.bytes_read + cost.bytes_written;
  if (const core::Tensor* lead = compute::float_lead(call)) op.dtype = lead->dtype();
  if (compute::is_conv(call.kind) && call.conv.groups > 1) {
    // The weight is (Cout, Cin/groups, kh, kw): one input channel per group is depthwise.
    const core::Tensor& w = compute::conv_weight(call);
    op.depthwise = w.ndim() == 4 && w.size(1) == 1;
  }
  log_.add(std::move(op));
}

namespace {

// Work that completed at creation; waiting on it records the dependency once.
class RecordedWork final : public comm::Work {
 public:
  RecordedWork(ProgramLog& log, int index) : log_(log), index_(index) {}
  bool is_completed() override { return true; }
  void wait() override {
    if (waited_) return;
    waited_ = true;
    log_.wait(index_);
  }

 private:
  ProgramLog& log_;
  int index_;
  bool waited_ = false;
};

}  // namespace

RecordingComm::RecordingComm(ProgramLog& log, const RecordingCompute& compute, int rank,
                             std::vector<int> world_ranks)
    : log_(log), compute_(compute), rank_(rank), world_ranks_(std::move(world_ranks)) {
  TESSERA_CHECK(rank_ >= 0 && rank_ < static_cast<int>(world_ranks_.size()), "recording communicator: rank ",
                rank_, " outside a group of ", world_ranks_.size());
}

comm::Capabilities RecordingComm::capabilities() const noexcept {
  comm::Capabilities c;
  c.all_to_all = true;
  c.split = true;
  c.multi_process = true;
  return c;
}

comm::WorkPtr RecordingComm::collective(const char* name, std::int64_t bytes) {
  ProgramOp op;
  op.kind = ProgramOp::Kind::Collective;
  op.name = name;
  op.layer = compute_.scope() ? compute_.scope()->layer : std::string();
  op.micro = compute_.scope() ? compute_.scope()->micro_batch : -1;
  op.bytes = bytes;
  op.group = world_ranks_;
  return std::make_unique<RecordedWork>(log_, log_.add(std::move(op)));
}

comm::WorkPtr RecordingComm::all_reduce(comm::BufferView buf, comm::ReduceOp) {
  return collective("all_reduce", static_cast<std::int64_t>(buf.bytes()));
}
comm::WorkPtr RecordingComm::all_gather(comm::BufferView, comm::BufferView recv) {
  return collective("all_gather", static_cast<std::int64_t>(recv.bytes()));
}
comm::WorkPtr RecordingComm::reduce_scatter(comm::BufferView send, comm::BufferView, comm::ReduceOp) {
  return collective("reduce_scatter", static_cast<std::int64_t>(send.bytes()));
}
comm::WorkPtr RecordingComm::broadcast(comm::BufferView buf, int) {
  return collective("broadcast", static_cast<std::int64_t>(buf.bytes()));
}
comm::WorkPtr RecordingComm::all_to_all(comm::BufferView send, comm::BufferView) {
  return collective("all_to_all", static_cast<std::int64_t>(send.bytes()));
}

void RecordingComm::barrier() { collective("barrier", 0)->wait(); }

comm::WorkPtr RecordingComm::batch_p2p(const std::vector<comm::P2POp>& ops) {
  ProgramOp op;
  op.kind = ProgramOp::Kind::P2P;
  op.name = "batch_p2p";
  op.layer = compute_.scope() ? compute_.scope()->layer : std::string();
  op.micro = compute_.scope() ? compute_.scope()->micro_batch : -1;
  for (const comm::P2POp& o : ops) {
    TESSERA_CHECK(o.peer >= 0 && o.peer < size(), "recording communicator: peer ", o.peer, " outside a group of ",
                  size());
    const std::int64_t b = static_cast<std::int64_t>(o.buf.bytes());
    op.transfers.push_back({o.kind == comm::P2POp::Kind::Send, world_ranks_[o.peer], b, o.tag});
    op.bytes += b;
  }
  return std::make_unique<RecordedWork>(log_, log_.add(std::move(op)));
}

std::unique_ptr<comm::Backend> RecordingComm::split(const std::vector<int>& ranks) {
  const auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end()) return nullptr;
  std::vector<int> world;
  for (int r : ranks) {
    TESSERA_CHECK(r >= 0 && r < size(), "recording communicator: split names rank ", r, " outside a group of ",
                  size());
    world.push_back(world_ranks_[r]);
  }
  return std::make_unique<RecordingComm>(log_, compute_, static_cast<int>(it - ranks.begin()), std::move(world));
}

}  // namespace tessera::sim
