// FaultComm: TESSERA_FAULT, the fault-injection hook for testing how a job handles a failed rank
// (as NCCL's test knobs are for NCCL). It passes every call on unchanged until the chosen rank
// reaches the chosen place of the chosen step, then kills, stops or cuts off its own process.
// Installed by the run layer only when the variable is set (docs/launching.md, "Faults").
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/comm/backend.hpp"
#include "tessera/nn/module.hpp"

namespace tessera::run {

/// One parsed TESSERA_FAULT value: `<action>:<place>:step=<N>:rank=<R>`.
struct FaultSpec {
  enum class Action : std::uint8_t { Kill, Stall, Drop };
  enum class Place : std::uint8_t { Forward, Halo, AllReduce };
  Action action = Action::Kill;
  Place place = Place::Forward;
  std::int64_t step = 1;  ///< 1-based, as `tessera train` prints "step N/M"
  int rank = 0;           ///< world rank
  std::string text;       ///< the variable's value, for the messages
};

/// The name of the variable and its syntax, as every message about it states them.
inline constexpr const char* kFaultVariable = "TESSERA_FAULT";
inline constexpr const char* kFaultSyntax =
    "<kill|stall|drop>:<forward|halo|allreduce>:step=<N>:rank=<R>, e.g. "
    "TESSERA_FAULT=kill:forward:step=2:rank=1";

/// Parses a TESSERA_FAULT value; throws InvalidArgument naming the variable and the syntax.
FaultSpec parse_fault(const std::string& value);

/// TESSERA_FAULT from the environment, parsed; nullopt when unset or empty.
std::optional<FaultSpec> fault_from_env();

/// What the decorator needs from the run loop: this process's world rank, the step being run
/// (0-based, Trainer::next_step) and the trainer's scope (which layer is communicating:
/// "grad_bucket" for gradients).
struct FaultState {
  FaultSpec spec;
  int world_rank = -1;
  std::atomic<std::int64_t> step{-1};
  const nn::Scope* scope = nullptr;
  std::atomic<bool> fired{false};
};

/// Shuts down (SHUT_RDWR) every TCP socket of this process, found through /proc/self/fd; returns
/// how many. Its peers see the connections drop, as when a network link is cut.
int drop_tcp_connections() noexcept;

class FaultComm final : public comm::Backend {
 public:
  FaultComm(comm::Backend& inner, std::shared_ptr<FaultState> state)
      : inner_(&inner), state_(std::move(state)) {}
  FaultComm(std::unique_ptr<comm::Backend> owned, std::shared_ptr<FaultState> state)
      : owned_(std::move(owned)), inner_(owned_.get()), state_(std::move(state)) {}

  std::string_view name() const noexcept override { return inner_->name(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  comm::Capabilities capabilities() const noexcept override { return inner_->capabilities(); }
  std::chrono::milliseconds timeout() const noexcept override { return inner_->timeout(); }
  comm::WorkPtr all_reduce(comm::BufferView buf, comm::ReduceOp op) override;
  comm::WorkPtr all_gather(comm::BufferView send, comm::BufferView recv) override {
    return inner_->all_gather(send, recv);
  }
  comm::WorkPtr reduce_scatter(comm::BufferView send, comm::BufferView recv,
                               comm::ReduceOp op) override {
    return inner_->reduce_scatter(send, recv, op);
  }
  comm::WorkPtr broadcast(comm::BufferView buf, int root) override {
    return inner_->broadcast(buf, root);
  }
  comm::WorkPtr all_to_all(comm::BufferView send, comm::BufferView recv) override {
    return inner_->all_to_all(send, recv);
  }
  comm::WorkPtr batch_p2p(const std::vector<comm::P2POp>& ops) override;
  comm::P2PPlanPtr prepare_p2p(const std::vector<comm::P2POp>& ops) override;
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<comm::Backend> split(const std::vector<int>& ranks) override;

 private:
  /// Injects the fault when this call is the chosen place of the chosen step on the chosen rank.
  void maybe_inject(FaultSpec::Place here);
  void p2p_place(const std::vector<comm::P2POp>& ops);

  std::unique_ptr<comm::Backend> owned_;
  comm::Backend* inner_;
  std::shared_ptr<FaultState> state_;
};

}  // namespace tessera::run
