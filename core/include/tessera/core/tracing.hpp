// Decorators that time every compute op and every communication call of a rank and record them
// as trace events (the schema of core/trace.hpp), without changing what they do.
#pragma once

#include <memory>
#include <vector>

#include "tessera/comm/backend.hpp"
#include "tessera/comm/forwarding.hpp"
#include "tessera/compute/backend.hpp"
#include "tessera/core/allocator.hpp"
#include "tessera/core/trace.hpp"
#include "tessera/nn/module.hpp"

namespace tessera::core {

/// What every event of one rank carries.
struct TraceTarget {
  TraceRecorder* recorder = nullptr;
  int rank = 0;                   ///< world rank (the trace's pid)
  std::vector<int> coords;        ///< mesh coordinates
  const nn::Scope* scope = nullptr;  ///< current layer, or null
  AllocatorPtr allocator;         ///< when set, a memory counter event follows each op
};

/// Wraps a compute backend: each execute() becomes one 'X' event on the compute lane with the
/// op's name, layer, FLOPs and bytes (compute::op_cost).
class TracingCompute final : public compute::Backend {
 public:
  TracingCompute(compute::Backend& inner, TraceTarget target);
  std::string_view name() const noexcept override { return inner_.name(); }
  int num_threads() const noexcept override { return inner_.num_threads(); }
  void set_num_threads(int n) override { inner_.set_num_threads(n); }
  compute::Capabilities capabilities() const noexcept override { return inner_.capabilities(); }
  void execute(const compute::OpCall& call) override;
  std::shared_ptr<core::DeviceMemory> device_memory() override { return inner_.device_memory(); }
  void synchronize() override { inner_.synchronize(); }

 private:
  compute::Backend& inner_;
  TraceTarget target_;
};

/// Wraps a comm backend: collectives become events on the comm lane; each send and receive of a
/// batch becomes an event on the lane of its peer, sends and receives joined by flow arrows.
/// Sub-groups from split() are traced too, with peers reported as world ranks.
///
/// An event spans the time the operation's data moved, as the backend lets it be observed. Where
/// the backend reports it (comm::Work::moved: local's collectives, moved inside the post of the
/// last rank to arrive; local's batches, from the post until the last message was in; ucx's
/// collectives, the run of their task on the group's thread) the event is exactly that span.
/// Otherwise it depends on Capabilities::overlaps_compute: for a backend whose data moves only
/// inside its calls, the post call; for one that progresses while the caller computes (nccl, ucx's
/// batches), from the post until its completion was first seen (is_completed() or the end of
/// wait()). Time a rank spends blocked in wait() on an operation not yet complete is a separate
/// event of category "wait" (name "wait", op the operation's) on the operation's lane(s). So no
/// event claims that data moved under a kernel when it did not, and "wait" shows what did not
/// overlap.
class TracingComm final : public comm::ForwardingBackend {
 public:
  TracingComm(std::unique_ptr<comm::Backend> owned, TraceTarget target, std::vector<int> world_ranks = {});
  TracingComm(comm::Backend& inner, TraceTarget target);
  comm::WorkPtr all_reduce(comm::BufferView buf, comm::ReduceOp op) override;
  comm::WorkPtr all_gather(comm::BufferView send, comm::BufferView recv) override;
  comm::WorkPtr reduce_scatter(comm::BufferView send, comm::BufferView recv, comm::ReduceOp op) override;
  comm::WorkPtr broadcast(comm::BufferView buf, int root) override;
  /// Prepared batches keep Backend's default (ForwardingBackend): each start comes through here.
  comm::WorkPtr batch_p2p(const std::vector<comm::P2POp>& ops) override;
  void barrier() override;
  comm::WorkPtr all_to_all(comm::BufferView send, comm::BufferView recv) override;

 protected:
  std::unique_ptr<comm::Backend> decorate_split(std::unique_ptr<comm::Backend> sub,
                                                const std::vector<int>& ranks) override;

 private:
  void init();
  comm::WorkPtr traced(const char* op, std::int64_t bytes, comm::WorkPtr w, double t0);
  comm::WorkPtr traced(comm::WorkPtr w, const char* op, std::vector<TraceEvent> events);
  int world_rank(int group_rank) const;

  TraceTarget target_;
  std::vector<int> world_ranks_;  // group rank → world rank (empty: identity)
  std::vector<std::int64_t> sent_, received_;  // per peer message counts, for flow ids
  bool overlaps_ = false;                      // inner().capabilities().overlaps_compute
};

}  // namespace tessera::core
