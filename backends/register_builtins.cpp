// The one explicit list of built-in backends (no self-registering statics: see docs/architecture.md).
#include "tessera/builtin_backends.hpp"

#include "tessera/comm/local.hpp"
#include "tessera/compute/cpu.hpp"
#include "tessera/core/error.hpp"
#ifdef TESSERA_HAVE_CUDA_BACKEND
#include "tessera/compute/cuda.hpp"
#endif

namespace tessera {

void register_builtin_backends(comm::Registry& registry) {
  registry.add("local", &comm::local::create, comm::local::capabilities());
}

std::vector<comm::PluginStatus> register_plugin_backends(comm::Registry& registry) {
  return comm::load_plugins(registry);
}

WorldBackend make_world_backend(const std::string& name, std::chrono::milliseconds timeout,
                                const comm::EnvInfo& info) {
  WorldBackend w;
  w.rendezvous = std::make_shared<comm::EnvRendezvous>(info, timeout);
  try {
    comm::Registry comms;
    register_builtin_backends(comms);
    register_plugin_backends(comms);
    comm::BackendOptions o;
    o.rank = info.rank;
    o.size = info.size;
    o.timeout = timeout;
    o.rendezvous = w.rendezvous;
    w.world = comms.create(name, o);
  } catch (const std::exception& e) {
    w.rendezvous->store()->abort(detail::cat("rank ", info.rank, " could not start comm backend '", name, "': ", e.what()));
    throw;
  }
  return w;
}

WorldBackend make_world_backend(const std::string& name, std::chrono::milliseconds timeout) {
  return make_world_backend(name, timeout, comm::read_env());
}

void register_builtin_backends(compute::Registry& registry) {
  registry.add("cpu", &compute::cpu::create);
#ifdef TESSERA_HAVE_CUDA_BACKEND
  // Opens libtessera_compute_cuda.so on first use (so no other run loads cuDNN/cuBLAS).
  registry.add("cuda", &compute::cuda::create);
#endif
}

std::string compute_backend_unusable(const std::string& name) {
#ifdef TESSERA_HAVE_CUDA_BACKEND
  if (name == "cuda") return compute::cuda::why_unusable();
#endif
  (void)name;
  return "";
}

bool compute_backend_loaded(const std::string& name) {
#ifdef TESSERA_HAVE_CUDA_BACKEND
  if (name == "cuda") return compute::cuda::plugin_loaded();
#endif
  (void)name;
  return true;
}

}  // namespace tessera
