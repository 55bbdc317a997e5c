// The ucx plugin's entry points: create (a world UcxBackend from the rendezvous, wrapped in the
// CUDA staging decorator where the toolkit was found) and the exported C tables the loader reads.
#include <memory>
#include <vector>

#include "tessera/comm/plugin_export.hpp"
#if TESSERA_UCX_CUDA_STAGING
#include "cuda_staging.hpp"
#endif
#include "tessera/core/error.hpp"
#include "ucx_backend.hpp"

namespace tessera::comm::ucx {

std::unique_ptr<Backend> create(const BackendOptions& options) {
  TESSERA_CHECK(
      options.rendezvous && options.rendezvous->store(),
      "comm backend 'ucx' needs a rendezvous with a key-value store (env://); run the ranks with "
      "tessera launch, torchrun-style variables, mpirun or srun");
  TESSERA_CHECK(options.size >= 1 && options.size <= 65535 && options.rank >= 0 &&
                    options.rank < options.size,
                "comm backend 'ucx': rank ", options.rank, " of ", options.size,
                " is out of range");
  check_progress_env();
  auto ctx =
      std::make_shared<Context>(options.rendezvous, options.rank, options.size, options.timeout);
  std::vector<int> members(static_cast<std::size_t>(options.size));
  for (int r = 0; r < options.size; ++r) members[static_cast<std::size_t>(r)] = r;
  auto world = std::make_unique<UcxBackend>(std::move(ctx), std::move(members), 1, options.timeout);
#if TESSERA_UCX_CUDA_STAGING
  return stage_cuda_through_host(std::move(world));
#else
  return world;
#endif
}

}  // namespace tessera::comm::ucx

extern "C" __attribute__((visibility("default"))) const tessera_comm_plugin_v1_t*
tessera_comm_plugin_v1(void) {
#if TESSERA_UCX_CUDA_STAGING
  static const tessera_comm_plugin_v1_t table =
      tessera::comm::plugin::make_table<&tessera::comm::ucx::create>(
          "ucx",
          "UCX tagged messages (host memory; CUDA buffers staged through pinned host memory; shm, "
          "tcp, ...)",
          tessera::comm::staged_capabilities(tessera::comm::ucx::capabilities()));
#else
  static const tessera_comm_plugin_v1_t table =
      tessera::comm::plugin::make_table<&tessera::comm::ucx::create>(
          "ucx", "UCX tagged messages (host memory; shm, tcp, ...)",
          tessera::comm::ucx::capabilities());
#endif
  return &table;
}

// Optional (plugin_v1.h): with TESSERA_UCX_PROGRESS=thread (the default) a group's collectives
// run on its own thread and a rendezvous-sized batch is progressed there, while the caller
// computes.
extern "C" __attribute__((visibility("default"))) int tessera_comm_plugin_v1_overlaps(void) {
  return tessera::comm::ucx::capabilities().overlaps_compute ? 1 : 0;
}

#if TESSERA_UCX_CUDA_STAGING
// Optional (plugin_v1.h): the stream CUDA buffers are staged on. Before each call with device
// tensors the host makes it wait for their compute stream's work, so the staging copies read them
// after the kernels that wrote them and write them after the kernels that read them before.
extern "C" __attribute__((visibility("default"))) void* tessera_comm_plugin_v1_stream(void* ctx) {
  return tessera::comm::staging_stream(tessera::comm::plugin::backend_of(ctx));
}
#endif

// Optional (plugin_v1.h): when a collective's data moved (the run of its task on the thread).
extern "C" __attribute__((visibility("default"))) int tessera_comm_plugin_v1_moved(
    void* req, std::int64_t* start_ns, std::int64_t* end_ns) {
  return tessera::comm::plugin::request_moved(req, start_ns, end_ns);
}
