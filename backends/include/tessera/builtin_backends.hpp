// The one list of backends built into this tessera: fills the comm and compute registries.
#pragma once

#include "tessera/comm/registry.hpp"
#include "tessera/compute/backend.hpp"

namespace tessera {

/// Adds every communication backend this build contains ("local", ...) to `registry`.
void register_builtin_backends(comm::Registry& registry);
/// Adds every compute backend this build contains ("cpu", ...) to `registry`.
void register_builtin_backends(compute::Registry& registry);

}  // namespace tessera
