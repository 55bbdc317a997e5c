// The one explicit list of built-in backends (no self-registering statics: see docs/architecture.md).
#include "tessera/builtin_backends.hpp"

#include "tessera/comm/local.hpp"
#include "tessera/compute/cpu.hpp"

namespace tessera {

void register_builtin_backends(comm::Registry& registry) {
  registry.add("local", &comm::local::create, comm::local::capabilities());
}

std::vector<comm::PluginStatus> register_plugin_backends(comm::Registry& registry) {
  return comm::load_plugins(registry);
}

void register_builtin_backends(compute::Registry& registry) {
  registry.add("cpu", &compute::cpu::create);
}

}  // namespace tessera
