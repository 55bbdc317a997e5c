// env:// rendezvous: rank, size and the store address from torchrun, Open MPI or Slurm variables;
// rank 0 (or the launcher) serves the TCP store, every rank joins it with the job's token.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tessera/comm/backend.hpp"
#include "tessera/comm/tcp_store.hpp"

namespace tessera::comm {

/// Where a process sits in its job, read from the environment.
struct EnvInfo {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string addr = "127.0.0.1";  ///< MASTER_ADDR
  int port = 29500;                ///< MASTER_PORT
  std::string token;               ///< TESSERA_RDZV_TOKEN (or derived from the job id)
  std::string bind;                ///< TESSERA_RDZV_BIND: the store's listen address (default addr)
  bool hosted = false;             ///< TESSERA_RDZV_HOSTED=1: the launcher serves the store
  std::string source;              ///< "torchrun", "openmpi", "slurm", "pmi" or "default"
  /// TESSERA_HEARTBEAT_MS: the rank's store client heartbeats this often (0 = never; set by an
  /// elastic `tessera launch`, whose store takes a rank silent for too long as lost).
  int heartbeat_ms = 0;
};

/// Reads EnvInfo through `getenv` (tests pass their own). Order: RANK/WORLD_SIZE (torchrun),
/// OMPI_COMM_WORLD_* (mpirun), SLURM_PROCID/SLURM_NTASKS (srun), PMI_RANK/PMI_SIZE; none of them:
/// one rank. Throws InvalidArgument for malformed numbers (naming the variable), a rank outside
/// the size, a negative TESSERA_HEARTBEAT_MS, or a job of several ranks without a token.
EnvInfo read_env(const std::function<const char*(const char*)>& getenv = nullptr);

/// The rendezvous of a multi-process job: joins (and on rank 0 serves, unless hosted) the store,
/// announces this rank and waits for all others.
class EnvRendezvous final : public Rendezvous {
 public:
  /// Blocks until all `info.size` ranks joined or `timeout` passed (TimeoutError naming the
  /// ranks that did not arrive).
  EnvRendezvous(const EnvInfo& info, std::chrono::milliseconds timeout);
  /// On rank 0 serving the store: waits (up to the timeout) for the other ranks to leave first.
  ~EnvRendezvous() override;

  std::string describe() const override;
  Store* store() override { return client_.get(); }
  TcpStoreClient& client() { return *client_; }
  const EnvInfo& info() const { return info_; }
  int rank() const { return info_.rank; }
  int size() const { return info_.size; }

 private:
  EnvInfo info_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> client_;
};

/// Waits until every rank of `size` called store_barrier with the same `name` (per-rank keys
/// "<name>/<rank>"); the TimeoutError names the ranks missing.
void store_barrier(Store& store, const std::string& name, int rank, int size,
                   std::chrono::milliseconds timeout);

}  // namespace tessera::comm
