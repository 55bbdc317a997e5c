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

#include "tessera/comm/forwarding.hpp"
#include "tessera/nn/module.hpp"

namespace tessera::run {

/// One parsed TESSERA_FAULT value: `<action>:<place>:step=<N>:rank=<R>[:round=<R>]`.
struct FaultSpec {
  enum class Action : std::uint8_t { Kill, Stall, Drop };
  enum class Place : std::uint8_t { Forward, Halo, AllReduce, Pipeline };
  Action action = Action::Kill;
  Place place = Place::Forward;
  std::int64_t step = 1;  ///< 1-based, as `tessera train` prints "step N/M"
  int rank = 0;           ///< world rank
  int round = -1;         ///< elastic round it applies in; -1: every round
  std::string text;       ///< the variable's value, for the messages
};

/// The name of the variable and its syntax, as every message about it states them.
inline constexpr const char* kFaultVariable = "TESSERA_FAULT";
inline constexpr const char* kFaultSyntax =
    "<kill|stall|drop>:<forward|halo|allreduce|pipeline>:step=<N>:rank=<R>[:round=<R>], e.g. "
    "TESSERA_FAULT=kill:forward:step=2:rank=1";

/// Parses a TESSERA_FAULT value; throws InvalidArgument naming the variable and the syntax.
FaultSpec parse_fault(const std::string& value);

/// TESSERA_FAULT from the environment, parsed; nullopt when unset or empty, or when it names
/// another elastic round than this process's.
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

/// Passes every call on (comm::ForwardingBackend) and injects the fault at its place: halo
/// exchanges are batch_p2p calls, gradients all_reduce calls.
class FaultComm final : public comm::ForwardingBackend {
 public:
  FaultComm(comm::Backend& inner, std::shared_ptr<FaultState> state)
      : ForwardingBackend(inner), state_(std::move(state)) {}
  FaultComm(std::unique_ptr<comm::Backend> owned, std::shared_ptr<FaultState> state)
      : ForwardingBackend(std::move(owned)), state_(std::move(state)) {}

  comm::WorkPtr all_reduce(comm::BufferView buf, comm::ReduceOp op) override;
  /// Checks the fault's place before the batch is posted.
  comm::WorkPtr batch_p2p(const std::vector<comm::P2POp>& ops) override;

 protected:
  std::unique_ptr<comm::Backend> decorate_split(std::unique_ptr<comm::Backend> sub,
                                                const std::vector<int>& ranks) override;

 private:
  /// Injects the fault when this call is the chosen place of the chosen step on the chosen rank.
  void maybe_inject(FaultSpec::Place here);
  void p2p_place(const std::vector<comm::P2POp>& ops);

  std::shared_ptr<FaultState> state_;
};

}  // namespace tessera::run
