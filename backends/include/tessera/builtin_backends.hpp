// The one list of backends built into this tessera: fills the comm and compute registries.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tessera/comm/env_rendezvous.hpp"
#include "tessera/comm/plugin_loader.hpp"
#include "tessera/comm/registry.hpp"
#include "tessera/compute/backend.hpp"

namespace tessera {

/// Adds every communication backend this build contains ("local", ...) to `registry`.
void register_builtin_backends(comm::Registry& registry);
/// Loads the comm plugins found on comm::plugin_search_path() into `registry` (after the
/// built-ins) and returns what happened to each, including known plugins that were not found.
std::vector<comm::PluginStatus> register_plugin_backends(comm::Registry& registry);
/// The world communicator of a job run one process per rank, and the rendezvous it joined
/// through (kept alive as long as the world: its store carries the job's abort flag).
struct WorldBackend {
  std::shared_ptr<comm::EnvRendezvous> rendezvous;
  std::unique_ptr<comm::Backend> world;  ///< destroyed before the rendezvous
};

/// Joins the job described by `info` (env:// variables: MASTER_ADDR, MASTER_PORT, RANK,
/// WORLD_SIZE, TESSERA_RDZV_TOKEN, as `tessera launch` sets them) and creates its world
/// communicator on the comm backend `name` (built-ins and plugins). Blocks until every rank
/// arrived or `timeout` passed (TimeoutError naming the missing ranks); `timeout` is also the
/// backend's deadline for every wait. An unknown backend or a failing start throws, after
/// setting the job's abort flag so the other ranks stop at once instead of waiting out their
/// deadline.
WorldBackend make_world_backend(const std::string& name, std::chrono::milliseconds timeout,
                                const comm::EnvInfo& info);
/// The same, with `info` read from this process's environment (comm::read_env()).
WorldBackend make_world_backend(const std::string& name, std::chrono::milliseconds timeout);

/// Adds every compute backend this build contains ("cpu", and "cuda" where built with CUDA: a
/// factory that opens libtessera_compute_cuda.so on first use) to `registry`.
void register_builtin_backends(compute::Registry& registry);

/// Why the compute backend `name` of this build cannot run in this process, "" when it can:
/// for "cuda", a library that does not load or "no CUDA device visible (cudaGetDeviceCount: ...)".
/// Initialises the CUDA runtime for "cuda" (never before a fork).
std::string compute_backend_unusable(const std::string& name);

/// Whether the compute backend `name`'s code is in this process: true for the built-in ones,
/// and for "cuda" once its library loaded (whether or not a device is visible).
bool compute_backend_loaded(const std::string& name);

}  // namespace tessera
