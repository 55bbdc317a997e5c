// FaultyComm: a comm::Backend decorator that breaks one thing on purpose — a halo exchange or a
// SyncBN / gradient reduction — so the training tests can show that their float32 tolerance still
// catches such a bug (a tolerance that passes a broken run proves nothing).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "tessera/comm/backend.hpp"
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

/// Passes every call to `inner`, breaking the operations `state->fault` names.
class FaultyComm final : public comm::Backend {
 public:
  FaultyComm(std::unique_ptr<comm::Backend> owned, std::shared_ptr<FaultState> state);
  FaultyComm(comm::Backend& inner, std::shared_ptr<FaultState> state);

  std::string_view name() const noexcept override { return inner_->name(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  comm::Capabilities capabilities() const noexcept override { return inner_->capabilities(); }
  std::chrono::milliseconds timeout() const noexcept override { return inner_->timeout(); }

  comm::WorkPtr all_reduce(comm::BufferView buf, comm::ReduceOp op) override;
  comm::WorkPtr all_gather(comm::BufferView send, comm::BufferView recv) override {
    return inner_->all_gather(send, recv);
  }
  comm::WorkPtr reduce_scatter(comm::BufferView send, comm::BufferView recv, comm::ReduceOp op) override {
    return inner_->reduce_scatter(send, recv, op);
  }
  comm::WorkPtr broadcast(comm::BufferView buf, int root) override { return inner_->broadcast(buf, root); }
  comm::WorkPtr batch_p2p(const std::vector<comm::P2POp>& ops) override;
  void barrier() override { inner_->barrier(); }
  comm::WorkPtr all_to_all(comm::BufferView send, comm::BufferView recv) override {
    return inner_->all_to_all(send, recv);
  }
  std::unique_ptr<comm::Backend> split(const std::vector<int>& ranks) override;

 private:
  std::string layer() const { return state_->scope ? state_->scope->layer : std::string(); }
  comm::WorkPtr reduce_without_last(comm::BufferView buf, comm::ReduceOp op);

  std::unique_ptr<comm::Backend> owned_;
  comm::Backend* inner_;
  std::shared_ptr<FaultState> state_;
};

}  // namespace tessera::test
