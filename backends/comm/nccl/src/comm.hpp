// One NCCL communicator of one rank: the ncclComm_t, the CUDA stream its operations run on, the
// job's store (unique id, abort flag), and the one wait loop every blocking call goes through
// (CUDA event, NCCL async state and the job's abort flag polled against a deadline; ncclCommAbort
// on failure or expiry).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <memory>
#include <string>

#include "tessera/comm/backend.hpp"
#include "tessera/comm/store.hpp"

namespace tessera::comm::nccl {

using Clock = std::chrono::steady_clock;

/// "cudaErrorNoDevice (no CUDA-capable device is detected)".
std::string cuda_text(cudaError_t e);
/// "unhandled system error (ncclSystemError)".
std::string nccl_text(ncclResult_t r);

/// "" when this process sees at least one CUDA device, else why not ("no CUDA device visible
/// (cudaGetDeviceCount: ...)"). Initialises the CUDA runtime.
std::string unavailable_reason();

/// This rank's device: the launcher's local rank (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
/// SLURM_LOCALID, MPI_LOCALRANKID) or else the global rank, modulo `device_count`;
/// TESSERA_CUDA_DEVICE overrides both.
int pick_device(int rank, int device_count);

/// One communicator. Owned (shared) by the Backend of its group and by that group's pending Work.
/// Used by one thread at a time, like its Backend.
class Comm {
 public:
  /// Collective over the world: world rank 0 draws an ncclUniqueId and publishes it in the store;
  /// every rank reads it and joins with ncclCommInitRankConfig (non-blocking, so the join is
  /// abortable). Throws BackendError when no device is visible, TimeoutError naming what was
  /// awaited when the deadline passes.
  static std::shared_ptr<Comm> create_world(std::shared_ptr<Rendezvous> rdzv, int rank, int size,
                                            std::chrono::milliseconds timeout);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  /// Collective over this communicator (ncclCommSplit). nullptr when color is NCCL_SPLIT_NOCOLOR.
  std::shared_ptr<Comm> split(int color, int key, const std::string& where);

  ncclComm_t get() const noexcept { return comm_; }
  cudaStream_t stream() const noexcept { return stream_; }
  int device() const noexcept { return device_; }
  int world_rank() const noexcept { return world_rank_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  Store& store() { return *rdzv_->store(); }

  /// Before issuing an operation: throws when this communicator failed earlier; makes its
  /// device current on the calling thread.
  void begin(const std::string& where, const std::string& what);
  /// After an NCCL call (or ncclGroupEnd) returned `r`: waits until the enqueue finished
  /// (non-blocking communicators report ncclInProgress meanwhile). Fails the communicator on an
  /// error, an abort of the job, or the deadline.
  void settle(ncclResult_t r, const std::string& where, const std::string& what, Clock::time_point deadline);
  /// A 1-element f32 device buffer for barrier (allocated on first use).
  float* scratch();

  /// One poll of an operation whose completion `ev` marks: true when it completed; throws (after
  /// aborting the communicator) when it failed or the job was aborted.
  bool poll(cudaEvent_t ev, const std::string& where, const std::string& what);
  /// Polls until `ev` completed; on the deadline aborts the communicator and throws TimeoutError
  /// saying what was awaited (`waiting_for`).
  void wait(cudaEvent_t ev, Clock::time_point deadline, const std::string& where, const std::string& what,
            const std::string& waiting_for);

  enum class Failure { System, Remote, Timeout };
  /// ncclCommAbort, remember why (later calls fail at once), publish the job's abort (except when
  /// the abort came from elsewhere), and throw the matching exception.
  [[noreturn]] void fail(Failure kind, const std::string& msg);

 private:
  Comm(std::shared_ptr<Rendezvous> rdzv, int world_rank, int device, std::chrono::milliseconds timeout);
  void init_stream();
  /// Waits for `c`'s async state to leave ncclInProgress; "" on success, else why.
  std::string settle_comm(ncclComm_t c, Clock::time_point deadline, bool* timed_out);
  /// The job's abort reason, or "" (checks the store's abort fd without blocking, or asks the
  /// store at most every 100 ms).
  std::string job_abort();
  void abort_nccl() noexcept;

  std::shared_ptr<Rendezvous> rdzv_;  // keeps the store alive
  int world_rank_ = 0;
  int device_ = 0;
  std::chrono::milliseconds timeout_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float* scratch_ = nullptr;
  std::string failed_;  // why this communicator is unusable
  Clock::time_point next_abort_check_{};
};

}  // namespace tessera::comm::nccl
