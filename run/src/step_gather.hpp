// Gathering one step's figures from every rank, so that every rank judges alarms alike and rank 0
// can write them: through shared memory between the threads of the local backend, or with an
// all_gather of doubles between processes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "tessera/comm/backend.hpp"
#include "tessera/core/allocator.hpp"
#include "tessera/nn/trainer.hpp"

namespace tessera::run {

/// A rank's {halo, collective} bytes of one step (CountingComm's counts).
using Bytes = std::array<std::int64_t, 2>;

/// Every rank's figures of one step, in rank order.
struct Gathered {
  std::vector<nn::StepStats> ranks;
  std::vector<Bytes> bytes;
  std::vector<data::DataStats> data;  ///< what each rank's dataset read and decoded in the step
};

/// Collects every rank's figures (collective: every rank calls it once a step). `memory` is the
/// rank's allocator: a backend that moves device memory only (nccl) gets the figures in it.
using Gather =
    std::function<Gathered(const nn::StepStats& mine, const Bytes& bytes,
                           const data::DataStats& data, const core::AllocatorPtr& memory)>;

/// The board the threads of one local run share: each posts its figures, all read every rank's.
class LocalGatherBoard {
 public:
  explicit LocalGatherBoard(int ranks);
  /// Posts this rank's figures and returns everyone's (two barriers on `world`).
  Gathered exchange(comm::Backend& world, const nn::StepStats& mine, const Bytes& bytes,
                    const data::DataStats& data);

 private:
  std::mutex mu_;
  Gathered current_;
};

/// One rank per process: the figures as doubles through world.all_gather (in device memory
/// when `memory` is a device's).
Gathered all_gather_figures(comm::Backend& world, const nn::StepStats& mine, const Bytes& bytes,
                            const data::DataStats& data, const core::AllocatorPtr& memory);

}  // namespace tessera::run
