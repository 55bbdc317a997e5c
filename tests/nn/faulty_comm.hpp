// FaultyComm: a comm::Backend decorator that breaks one thing on purpose — a halo exchange or a
// SyncBN / gradient reduction — so the training tests can show that their float32 tolerance still
// catches such a bug (a tolerance that passes a broken run proves nothing).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "tessera/comm/forwarding.hpp"
#include "tessera/nn/module.hpp"

namespace tessera::test {

/// What FaultyComm breaks. Halo faults act on the receives of the convolution's halo exchange
/// (world batch_p2p, tags nn::kHaloTag forward and kHaloTag + 1 backward); reduction faults on
/// the all-reduces issued inside a BatchNorm layer's scope (SyncBN statistics and their backward
/// sums) or inside the trainer's "grad_bucket" scope (the gradient all-reduce).
enum class Fault {
  None,
  HaloZero,            ///< every forward halo arrives as zeros (the exchange silently skipped)
  HaloOneValue,        ///< the first value of every forward halo message arrives as zero
  HaloBackwardZero,    ///< the adjoint's halo gradients are dropped (dx misses its neighbours' part)
  SyncBnLocal,         ///< BatchNorm reduces nothing: each rank normalises by its own statistics
  SyncBnMissingRank,   ///< BatchNorm's sums leave out the group's last rank
  GradMissingRank,     ///< the gradient all-reduce leaves out the group's last rank
};

const char* fault_name(Fault f);

/// Shared by a FaultyComm and every sub-group it splits off.
struct FaultState {
  Fault fault = Fault::None;
  const nn::Scope* scope = nullptr;  ///< the trainer's scope (which layer is running); set after construction
  std::atomic<long> injected{0};     ///< how many operations were broken (a test checks it fired)
  std::atomic<long> halo_batches{0};  ///< batch_p2p calls with a forward halo (kHaloTag) in them
};

/// Passes every call to `inner` (comm::ForwardingBackend), breaking the operations
/// `state->fault` names. Prepared batches keep Backend's default, so each start is a batch_p2p
/// here and is broken like one.
class FaultyComm final : public comm::ForwardingBackend {
 public:
  FaultyComm(std::unique_ptr<comm::Backend> owned, std::shared_ptr<FaultState> state);
  FaultyComm(comm::Backend& inner, std::shared_ptr<FaultState> state);

  comm::WorkPtr all_reduce(comm::BufferView buf, comm::ReduceOp op) override;
  comm::WorkPtr batch_p2p(const std::vector<comm::P2POp>& ops) override;

 protected:
  std::unique_ptr<comm::Backend> decorate_split(std::unique_ptr<comm::Backend> sub,
                                                const std::vector<int>& ranks) override;

 private:
  std::string layer() const { return state_->scope ? state_->scope->layer : std::string(); }
  comm::WorkPtr reduce_without_last(comm::BufferView buf, comm::ReduceOp op);

  std::shared_ptr<FaultState> state_;
};

}  // namespace tessera::test
